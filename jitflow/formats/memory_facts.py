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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import LibraryFormatError
from . import bounded_json
from .c_expr import Expr
from .vm_walk import IRSizes

SCHEMA = "jitflow.memory/1"
SECTION = ".jitflow.memory"
FILE = "memory.json"


def _size(value: Any) -> Expr | None:
    return None if value is None else _expr(value)


def _expr(value: Any) -> Expr:
    """A size as the record writes it: a whole number or the text of an expression."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{type(value).__name__} where a size belongs")
    return Expr.from_json(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{type(value).__name__} where a list belongs")
    return value


def _json(size: Expr | None) -> int | str | None:
    return None if size is None else size.to_json()


def _peaks(d: Mapping[str, Any]) -> dict[str, Expr | None]:
    return {_text(k): _size(v) for k, v in d.items()}


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
        first, last = d["live"]
        return cls(_text(d["origin"]), _number(d["ordinal"]), _text(d["device"]), _size(d.get("size")),
                   (_number(first), _number(last)), bool(d.get("cached")))


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
        ir = _map(d.get("ir") or {})
        tensors = tuple(None if t is None else tuple(_expr(x) for x in _list(t)) for t in _list(ir.get("tensors", [])))
        sizes = IRSizes(tuple(_size(s) for s in _list(ir.get("storages", []))), tensors)
        return cls(tuple(StorageFact.from_json(_map(s)) for s in _list(d.get("storages", []))), sizes,
                   _peaks(_map(d.get("peaks", {}))),
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
        workspaces = [_map(w) for w in _list(d.get("workspaces", []))]
        return cls(tuple(Workspace(_text(w["device"]), _text(w["dtype"]), _expr(w["size"])) for w in workspaces),
                   _peaks(_map(d.get("peaks", {}))))


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
        """The record in `text`; LibraryFormatError for anything else (too large or deep, not JSON,
        or a field of another type than this module writes)."""
        try:
            d = bounded_json.loads(text, MAX_BYTES, MAX_DEPTH, "the memory record")
        except bounded_json.BadJSON as exc:
            raise LibraryFormatError(str(exc)) from None
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise LibraryFormatError(f"not a jitflow memory record (schema {str(d.get('schema'))[:40]!r}, expected "
                                     f"{SCHEMA})" if isinstance(d, dict) else "not a jitflow memory record")
        try:
            return cls({_text(k): VMFacts.from_json(_map(v)) for k, v in _map(d.get("vm", {})).items()},
                       {_text(k): HostFacts.from_json(_map(v)) for k, v in _map(d.get("host", {})).items()})
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise LibraryFormatError(f"the memory record is damaged ({type(exc).__name__}: {str(exc)[:80]})") \
                from None


#: a record is a few kilobytes for a real model; nothing jitflow writes nests deeper than 6 levels
MAX_BYTES, MAX_DEPTH = 16 << 20, 8


def _map(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{type(value).__name__} where an object belongs")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where a name belongs")
    return value


def _number(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{type(value).__name__} where a whole number belongs")
    return value


def read_library(path: str | Path) -> MemoryFacts | None:
    """The record in a library's `.jitflow.memory` section, or None when it has none (or is not
    ELF); LibraryFormatError for a record that is there and damaged. The section is read through
    the ELF headers' bounded reads (formats/elf_file.py)."""
    from .elf_file import ElfFile

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = ElfFile(fd).section_data(SECTION, cap=MAX_BYTES)
    except (OSError, LibraryFormatError):
        return None
    finally:
        os.close(fd)
    return None if data is None else MemoryFacts.from_json(data)


def read(record: Path, library: Path) -> MemoryFacts | None:
    """The record of a cache entry or build folder: its memory.json (`record`), else the section of
    its library."""
    try:
        return MemoryFacts.from_json(record.read_bytes())
    except FileNotFoundError:
        return read_library(library)
