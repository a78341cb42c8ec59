"""Gather the memory plan (ModelMemory) of a Relax library: its bytecode walked function by function, joined with
the host code of the TIR functions it calls (their workspaces and kernel launches).

Without the host C (a library inspected on its own) storages, constants and copies are still
known; sizes computed by shape functions, workspaces and launches are not.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

from ..formats import library_blob, vm_program
from ..formats.vm_program import TensorConstant, VMProgram
from . import shape_funcs, vm_bytecode
from .host_code import HostCode
from .memory_plan import (
    ModelConstant,
    ModelCopy,
    ModelMemory,
    ModelStorage,
    ModelTensor,
    VMFunction,
    direction,
)
from .types import Allocation, HostFunction, Launch

_MAX_DEPTH = 16
T = TypeVar("T", Allocation, Launch)


def devices_for(kind: str | None) -> tuple[str, ...]:
    """The devices a VirtualMachine gets for a library of this target kind (the host is appended last)."""
    return ("cuda", "cpu") if kind == "cuda" else ("cpu",)


def _dim(d: object) -> int | str:
    if d is None:
        return "?"
    return d.value if d.value is not None else d.text  # type: ignore[attr-defined]


def _tensor(t: vm_bytecode.TensorInfo) -> ModelTensor:
    return ModelTensor(None if t.dims is None else tuple(_dim(d) for d in t.dims), t.dtype, t.offset)


class _Joiner:
    """Per-call launches and workspaces of a VM function: its TIR calls looked up in the host code,
    calls of other VM functions followed."""

    def __init__(self, walks: dict[str, vm_bytecode.FunctionWalk], host: HostCode | None) -> None:
        self.walks = walks
        self.host = host

    def collect(self, name: str, items: Sequence[T], depth: int = 0) -> tuple[T, ...] | None:
        """The items (launches or allocations of the host code) of the TIR functions one call of
        `name` runs, in call order; None without host code."""
        if self.host is None:
            return None
        out: list[T] = []
        for callee in self.walks[name].calls:
            if callee in self.walks and depth < _MAX_DEPTH:
                out += self.collect(callee, items, depth + 1) or ()
            else:
                out += [x for x in items if x.function == callee]  # type: ignore[attr-defined]
        return tuple(out)


def _alias(host_c: str | None, function: HostFunction) -> bool:
    """Whether a host function only forwards to another (TVM's module "main" entry alias)."""
    body = (host_c or "").splitlines()[function.line:function.end_line - 1]
    return len(body) == 1 and body[0].strip().startswith("return __tvm_ffi_")


def build(program: VMProgram, devices: tuple[str, ...], host: HostCode | None = None,
          host_c: str | None = None) -> ModelMemory:
    """The model view of a decoded VM executable; host and host_c are the TIR functions' host code."""
    by_name = {f.name: f for f in host.functions} if host is not None else {}

    def shape_function(name: str) -> dict[int, str] | None:
        fn = by_name.get(name)
        return shape_funcs.heap_writes(host_c, fn) if fn is not None and host_c is not None else None

    walks = {f.name: vm_bytecode.walk(program, f.name, devices, shape_function)
             for f in program.functions if f.kind == "vm"}
    joiner = _Joiner(walks, host)
    functions = []
    symbols: dict[str, str] = {}
    notes: list[str] = []
    for name, w in walks.items():
        symbols.update(w.symbols)
        storages = tuple(ModelStorage(name, i, b.size, b.device, b.scope, b.dtype, tuple(_tensor(t) for t in b.tensors),
                                      b.holds_output) for i, b in enumerate(w.blocks))
        copies = tuple(ModelCopy(name, c.instruction, c.call, direction(c.source, c.destination),
                                 c.tensor.nbytes if c.tensor else None, str(_tensor(c.tensor)) if c.tensor else None)
                       for c in w.copies)
        functions.append(VMFunction(name, w.params, storages, tuple(w.calls), copies,
                                    joiner.collect(name, host.allocations if host else []),
                                    joiner.collect(name, host.launches if host else [])))
        for sf in w.unknown_shape_functions:
            notes.append(f"{name}: the sizes {sf} computes are not known here (its host code is not available)")
        if any(f.kind == "vm_tir" for f in program.functions):
            notes.append("functions compiled to TIR by the VM (vm_tir) are not walked")
    constants = tuple(ModelConstant(i, c.shape, str(c.dtype), c.nbytes)
                      for i, c in enumerate(program.constants) if isinstance(c, TensorConstant))
    not_called = None
    if host is not None:
        called = {c for w in walks.values() for c in w.calls}
        not_called = tuple(f.name for f in host.functions if f.symbol.startswith("__tvm_ffi_")
                           and f.name not in called and not _alias(host_c, f))
    return ModelMemory(devices, tuple(functions), constants, symbols, not_called, tuple(dict.fromkeys(notes)))


def from_library(library: object, kind: str | None = None, host: HostCode | None = None,
                 host_c: str | None = None) -> ModelMemory | None:
    """The model view of a library file, or None when it holds kernels rather than a Relax VM.

    kind is the target kind ("cuda" or "c"); by default "cuda" when the library has device code.
    """
    raw = library_blob.blob_of(library)  # type: ignore[arg-type]
    if raw is None:
        return None
    blob = library_blob.parse(raw)
    payload = vm_program.payload_of(blob)
    if payload is None:
        return None
    if kind is None:
        kind = "cuda" if any(m.kind == "cuda" for m in blob.modules) else "c"
    return build(vm_program.parse(payload), devices_for(kind), host, host_c)
