"""The memory record a build writes: sizes from the IR, lifetimes, peaks and totals, as JSON.

The build (builder/memory_facts.py) writes it twice, with the same bytes: as `memory.json` in the
cache entry and as the section `.jitflow.memory` of the library (not loaded at run time), so that a
build, a cache hit and an exported library report the same. A library without it (an older build,
a library made by TVM) is reported from its bytecode and host C alone.

    {"schema": "jitflow.memory/1",
     "vm": {name: {"storages": [{"origin", "ordinal", "device", "size", "live": [first, last], "cached"}],
                   "ir": {"storages": [size or null], "tensors": [[dim, ...] or null]},
                   "peaks": {device: size or null}, "storage_bytes", "cached_bytes", "workspace_bytes"}},
     "host": {name: {"workspaces": [{"device", "dtype", "size"}], "peaks": {device: size or null}}}}

A size is a number or the text of an expression of the shape symbols (see c_expr.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import LibraryFormatError
from .c_expr import Expr
from .vm_walk import IRSizes

SCHEMA = "jitflow.memory/1"
SECTION = ".jitflow.memory"
FILE = "memory.json"


def _size(value: Any) -> Expr | None:
    return None if value is None else Expr.from_json(value)


def _json(size: Expr | None) -> int | str | None:
    return None if size is None else size.to_json()


def _peaks(d: Mapping[str, Any]) -> dict[str, Expr | None]:
    return {k: _size(v) for k, v in d.items()}


@dataclass(frozen=True)
class StorageFact:
    """One storage block of a call: which VM function allocates it (the caller, or a function folded
    in), its index there, its device, size and lifetime, whether it is a CUDA graph's cached storage."""

    origin: str
    ordinal: int
    device: str
    size: Expr | None
    live: tuple[int, int]
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "ordinal": self.ordinal, "device": self.device, "size": _json(self.size),
                "live": list(self.live), "cached": self.cached}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "StorageFact":
        return cls(d["origin"], d["ordinal"], d["device"], _size(d.get("size")), tuple(d["live"]),  # type: ignore
                   bool(d.get("cached")))


@dataclass(frozen=True)
class VMFacts:
    """One VM function: its storage, the sizes its IR gives, its peaks and totals per call."""

    storages: tuple[StorageFact, ...] = ()
    ir: IRSizes = IRSizes()
    peaks: Mapping[str, Expr | None] = field(default_factory=dict)
    storage_bytes: Expr | None = None
    cached_bytes: Expr | None = None
    workspace_bytes: Expr | None = None

    def to_json(self) -> dict[str, Any]:
        return {"storages": [s.to_json() for s in self.storages],
                "ir": {"storages": [_json(s) for s in self.ir.storages],
                       "tensors": [None if t is None else [d.to_json() for d in t] for t in self.ir.tensors]},
                "peaks": {k: _json(v) for k, v in self.peaks.items()}, "storage_bytes": _json(self.storage_bytes),
                "cached_bytes": _json(self.cached_bytes), "workspace_bytes": _json(self.workspace_bytes)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "VMFacts":
        ir = d.get("ir") or {}
        tensors = tuple(None if t is None else tuple(Expr.from_json(x) for x in t) for t in ir.get("tensors", ()))
        sizes = IRSizes(tuple(_size(s) for s in ir.get("storages", ())), tensors)
        return cls(tuple(StorageFact.from_json(s) for s in d.get("storages", ())), sizes, _peaks(d.get("peaks", {})),
                   _size(d.get("storage_bytes")), _size(d.get("cached_bytes")), _size(d.get("workspace_bytes")))


@dataclass(frozen=True)
class Workspace:
    """A TIR function's workspace, in the order its lowered IR allocates them."""

    device: str
    dtype: str
    size: Expr


@dataclass(frozen=True)
class HostFacts:
    """One TIR host function: its workspaces and their peak per device (one call)."""

    workspaces: tuple[Workspace, ...] = ()
    peaks: Mapping[str, Expr | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"workspaces": [{"device": w.device, "dtype": w.dtype, "size": w.size.to_json()}
                               for w in self.workspaces], "peaks": {k: _json(v) for k, v in self.peaks.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "HostFacts":
        workspaces = d.get("workspaces", ())
        return cls(tuple(Workspace(w["device"], w["dtype"], Expr.from_json(w["size"])) for w in workspaces),
                   _peaks(d.get("peaks", {})))


@dataclass(frozen=True)
class MemoryFacts:
    """The record: VM functions and TIR host functions by name."""

    vm: Mapping[str, VMFacts] = field(default_factory=dict)
    host: Mapping[str, HostFacts] = field(default_factory=dict)

    def ir_sizes(self) -> dict[str, IRSizes]:
        return {name: f.ir for name, f in self.vm.items()}

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, "vm": {k: v.to_json() for k, v in self.vm.items()},
                           "host": {k: v.to_json() for k, v in self.host.items()}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> "MemoryFacts":
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise LibraryFormatError(f"the memory record is not JSON: {exc}") from None
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise LibraryFormatError(f"not a jitflow memory record (schema {d.get('schema')!r}, expected {SCHEMA})"
                                     if isinstance(d, dict) else "not a jitflow memory record")
        return cls({k: VMFacts.from_json(v) for k, v in d.get("vm", {}).items()},
                   {k: HostFacts.from_json(v) for k, v in d.get("host", {}).items()})


def read_library(path: str | Path) -> MemoryFacts | None:
    """The record in a library's `.jitflow.memory` section, or None when it has none (or is not ELF)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            section = ELFFile(f).get_section_by_name(SECTION)
            data = section.data() if section is not None else None
    except (OSError, ELFError):
        return None
    return None if data is None else MemoryFacts.from_json(data)


def read(record: Path, library: Path) -> MemoryFacts | None:
    """The record of a cache entry or build folder: its memory.json (`record`), else the section of
    its library."""
    try:
        return MemoryFacts.from_json(record.read_bytes())
    except FileNotFoundError:
        return read_library(library)
