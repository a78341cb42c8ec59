"""The memory plan of a whole Relax model: what the VM allocates and copies per call and at start-up.

A Relax library holds VM bytecode beside the TIR functions' host code, so a model's memory is in
three places: the storage blocks the bytecode allocates on every call (formats/vm_walk.py), the
constants (weights) the VM uploads to its device when it starts, and the workspaces and kernel
launches of each TIR function the bytecode calls (host_code.py). ModelMemory holds them together,
per VM function and in total, with each block's lifetime and each call's peak, and a stable JSON
form (the "model" field of a Report).

The peak of a call is the most device bytes allocated during the call and not yet released, per
device, counted from the call's entry: the returned output counts, the weights uploaded at
start-up and a CUDA graph's cached storage (allocated on the first call, kept for later ones) do
not; each TIR workspace counts at the VM instruction that calls its function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import InvalidInputError
from ..formats import c_expr
from ..formats.c_expr import Expr
from .types import Allocation, Launch

DEPENDS = "depends on shape"


def size_json(size: Expr | None) -> int | str:
    """A size in JSON: a number, an expression of the symbols, or "depends on shape"."""
    return DEPENDS if size is None else size.to_json()


def size_from_json(value: int | str | None) -> Expr | None:
    return None if value is None or value == DEPENDS else Expr.from_json(value)


def direction(source: str | None, destination: str) -> str:
    """"host->device", "device->host", "device->device", or "to host"/"to device" when the
    source is not known from the bytecode."""
    def side(name: str) -> str:
        return "host" if name in ("cpu", "cuda_host") else "device"

    return f"to {side(destination)}" if source is None else f"{side(source)}->{side(destination)}"


@dataclass(frozen=True)
class ModelTensor:
    """A tensor placed in a storage block: dims (numbers, symbol expressions, or "?"), dtype, offset."""

    shape: tuple[int | str, ...] | None
    dtype: str | None
    offset: int | None

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ", ".join(str(d) for d in self.shape)
        return f"{self.dtype or '?'}[{dims}]" + (f"@{self.offset}" if self.offset else "")

    def to_json(self) -> dict[str, Any]:
        return {"shape": None if self.shape is None else list(self.shape), "dtype": self.dtype,
                "offset": self.offset}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ModelTensor":
        return cls(None if d.get("shape") is None else tuple(d["shape"]), d.get("dtype"), d.get("offset"))


@dataclass(frozen=True)
class ModelStorage:
    """One storage block a VM function allocates on each call (vm.builtin.alloc_storage)."""

    function: str
    index: int
    size: Expr | None           # bytes: a number, an expression of the symbols, or None ("depends on shape")
    device: str                 # "cuda", "cpu", ...
    scope: str
    dtype: str
    tensors: tuple[ModelTensor, ...] = ()
    holds_output: bool = False
    live: tuple[int, int] | None = None   # [allocation, last release] as positions in the function's bytecode
    cached: bool = False                  # a CUDA graph's storage: allocated once, kept across calls

    @property
    def bytes(self) -> int | None:
        return None if self.size is None else self.size.value

    @property
    def shared_by(self) -> int:
        """How many tensors live in this block over the call (more than one: they share it in turn)."""
        return len(self.tensors)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "index": self.index, "bytes": self.bytes, "size": size_json(self.size),
                "device": self.device, "scope": self.scope, "dtype": self.dtype,
                "tensors": [t.to_json() for t in self.tensors], "shared_by": self.shared_by,
                "holds_output": self.holds_output, "live": None if self.live is None else list(self.live),
                "cached": self.cached}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ModelStorage":
        live = d.get("live")
        return cls(d["function"], d["index"], size_from_json(d.get("size")), d["device"], d["scope"], d["dtype"],
                   tuple(ModelTensor.from_json(t) for t in d.get("tensors", ())), d.get("holds_output", False),
                   None if live is None else (int(live[0]), int(live[1])), bool(d.get("cached")))


@dataclass(frozen=True)
class ModelConstant:
    """A constant (a bound weight) of the VM: uploaded to the VM's device once, when the VM starts."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "shape": list(self.shape), "dtype": self.dtype, "bytes": self.bytes}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ModelConstant":
        return cls(d["index"], tuple(d["shape"]), d["dtype"], d["bytes"])


@dataclass(frozen=True)
class ModelCopy:
    """A copy a VM builtin makes on each call: which builtin, the direction, the bytes where known."""

    function: str
    instruction: int
    call: str
    direction: str
    size: Expr | None
    tensor: str | None = None
    live: tuple[int, int] | None = None     # a new tensor on the destination (to_device): its lifetime
    device: str | None = None               # ... and the device it is allocated on

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "instruction": self.instruction, "call": self.call,
                "direction": self.direction, "bytes": None if self.size is None else self.size.value,
                "size": size_json(self.size), "tensor": self.tensor,
                "live": None if self.live is None else list(self.live), "device": self.device}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ModelCopy":
        live = d.get("live")
        return cls(d["function"], d["instruction"], d["call"], d["direction"], size_from_json(d.get("size")),
                   d.get("tensor"), None if live is None else (int(live[0]), int(live[1])), d.get("device"))


@dataclass(frozen=True)
class Totals:
    """Counts and bytes for one call of a VM function (storage, workspaces, copies, launches)."""

    storages: int
    storage_bytes: Expr | None          # None when a storage's size depends on a shape the report cannot read
    workspaces: int
    workspace_bytes: Expr | None
    copies: int
    copy_bytes: Expr | None
    launches: int | None                # None without the host code
    cached_storages: int = 0            # a CUDA graph's storage: allocated once, not per call
    cached_bytes: Expr | None = c_expr.constant(0)
    replayed: int = 0                   # of the launches, those replayed from a captured CUDA graph

    def to_json(self) -> dict[str, Any]:
        return {"storages": self.storages, "storage_bytes": size_json(self.storage_bytes),
                "workspaces": self.workspaces, "workspace_bytes": size_json(self.workspace_bytes),
                "copies": self.copies, "copy_bytes": size_json(self.copy_bytes), "launches": self.launches,
                "cached_storages": self.cached_storages, "cached_bytes": size_json(self.cached_bytes),
                "replayed": self.replayed}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Totals":
        return cls(d["storages"], size_from_json(d.get("storage_bytes")), d["workspaces"],
                   size_from_json(d.get("workspace_bytes")), d["copies"], size_from_json(d.get("copy_bytes")),
                   d.get("launches"), d.get("cached_storages", 0), size_from_json(d.get("cached_bytes", 0)),
                   d.get("replayed", 0))


def _total(sizes: Sequence[Expr | None]) -> Expr | None:
    return None if any(s is None for s in sizes) else c_expr.total([s for s in sizes if s is not None])


def count_totals(storages: Sequence[ModelStorage], workspaces: Sequence[Allocation] | None,
                 copies: Sequence[ModelCopy], launches: Sequence[Launch] | None) -> Totals:
    """The per-call totals of these lists, sums folded where constant (the build's simplified sums,
    where it recorded them, replace these)."""
    per_call = [s for s in storages if not s.cached]
    cached = [s for s in storages if s.cached]
    return Totals(len(per_call), _total([s.size for s in per_call]), len(workspaces or ()),
                  c_expr.total([a.size for a in workspaces or ()]), len(copies), _total([c.size for c in copies]),
                  None if launches is None else len(launches), len(cached), _total([s.size for s in cached]),
                  sum(1 for x in launches or () if x.replayed))


@dataclass(frozen=True)
class VMFunction:
    """One Relax function of the VM and what one call of it does with memory."""

    name: str
    params: tuple[str, ...]
    storages: tuple[ModelStorage, ...] = ()
    calls: tuple[str, ...] = ()                  # the packed (TIR) functions it calls, in order
    copies: tuple[ModelCopy, ...] = ()
    workspaces: tuple[Allocation, ...] | None = ()   # the called TIR functions' workspaces; None without host C
    launches: tuple[Launch, ...] | None = ()         # the kernel launches of one call, in order; None without host C
    totals: Totals | None = None                     # per call (counted from the lists when not given)
    peaks: Mapping[str, Expr | None] = field(default_factory=dict)   # device -> peak of one call (None: unknown)
    peak: Expr | None = None                         # the peak on the VM's device (the model's first device)
    length: int | None = None                        # instructions in its bytecode (the positions of `live`)
    folded: tuple[str, ...] = ()                     # VM functions folded in (a CUDA graph's alloc and capture)

    def __post_init__(self) -> None:
        if self.totals is None:
            object.__setattr__(self, "totals", count_totals(self.storages, self.workspaces, self.copies,
                                                            self.launches))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": list(self.params), "storages": [s.to_json() for s in self.storages],
                "calls": list(self.calls), "copies": [c.to_json() for c in self.copies],
                "workspaces": None if self.workspaces is None else [a.to_json() for a in self.workspaces],
                "launches": None if self.launches is None else [x.to_json() for x in self.launches],
                "per_call": self.totals.to_json(),  # type: ignore[union-attr]
                "peak_bytes": None if self.peak is None else self.peak.value,
                "peak": None if self.peak is None else self.peak.text,
                "peaks": {d: None if p is None else p.to_json() for d, p in self.peaks.items()},
                "length": self.length, "folded": list(self.folded)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "VMFunction":
        peak = d.get("peak_bytes") if d.get("peak_bytes") is not None else d.get("peak")
        return cls(d["name"], tuple(d.get("params", ())),
                   tuple(ModelStorage.from_json(s) for s in d.get("storages", ())), tuple(d.get("calls", ())),
                   tuple(ModelCopy.from_json(c) for c in d.get("copies", ())),
                   None if d.get("workspaces") is None else tuple(Allocation.from_json(a) for a in d["workspaces"]),
                   None if d.get("launches") is None else tuple(Launch.from_json(x) for x in d["launches"]),
                   Totals.from_json(d["per_call"]) if d.get("per_call") else None,
                   {k: size_from_json(v) for k, v in (d.get("peaks") or {}).items()},
                   size_from_json(peak), d.get("length"), tuple(d.get("folded", ())))


@dataclass(frozen=True)
class ModelMemory:
    """Every allocation and copy of a Relax model: per call of each VM function, and at start-up."""

    devices: tuple[str, ...]                     # the VM's devices, the host last: ("cuda", "cpu") or ("cpu",)
    functions: tuple[VMFunction, ...]
    constants: tuple[ModelConstant, ...]
    symbols: Mapping[str, str]                   # shape symbol -> where it comes from ("x.shape[0]")
    not_called: tuple[str, ...] | None = ()      # compiled TIR functions the bytecode never calls
    notes: tuple[str, ...] = ()

    @property
    def constant_bytes(self) -> int:
        return sum(c.bytes for c in self.constants)

    @property
    def upload(self) -> str | None:
        """How the constants reach the VM's device when it starts (None: they stay where they are)."""
        return None if self.devices[0] in ("cpu", "cuda_host") else "host->device"

    def function(self, name: str) -> VMFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise InvalidInputError(f"no VM function named {name!r}; functions: "
                                f"{', '.join(f.name for f in self.functions)}")

    def to_json(self) -> dict[str, Any]:
        return {"devices": list(self.devices), "functions": [f.to_json() for f in self.functions],
                "startup": {"constants": len(self.constants), "constant_bytes": self.constant_bytes,
                            "upload": self.upload, "tensors": [c.to_json() for c in self.constants]},
                "symbols": dict(self.symbols),
                "not_called": None if self.not_called is None else list(self.not_called),
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ModelMemory":
        startup = d.get("startup") or {}
        return cls(tuple(d["devices"]), tuple(VMFunction.from_json(f) for f in d.get("functions", ())),
                   tuple(ModelConstant.from_json(c) for c in startup.get("tensors", ())),
                   dict(d.get("symbols", {})),
                   None if d.get("not_called") is None else tuple(d["not_called"]), tuple(d.get("notes", ())))
