"""Gather the memory plan (ModelMemory) of a Relax library: its bytecode walked function by function
(lifetimes, CUDA graphs folded in), joined with the host code of the TIR functions it calls (their
workspaces and kernel launches, with their host C lines).

Where the build left its memory record (formats/memory_facts.py) the sizes, totals and peaks are
the record's: read from the IR and simplified by TVM's arithmetic when the library was built. A
library without one (an older build, a library made by TVM) has sizes from the bytecode and the
shape functions' host C, and peaks as sums folded where constant. Without the host C (a library
inspected on its own) storages, lifetimes, constants and copies are still known; sizes computed by
shape functions, workspaces and launches are not, and neither is a peak that depends on them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence, TypeVar

from ..formats import c_expr, library_blob, lifetimes, vm_program, vm_walk
from ..formats.c_expr import Expr
from ..formats.memory_facts import MemoryFacts, VMFacts
from ..formats.vm_program import TensorConstant, VMProgram
from . import shape_funcs
from .host_code import HostCode
from .memory_plan import (
    ModelConstant,
    ModelCopy,
    ModelMemory,
    ModelStorage,
    ModelTensor,
    Totals,
    VMFunction,
    count_totals,
    direction,
)
from .types import Allocation, HostFunction, Launch

_MAX_DEPTH = 16
T = TypeVar("T", Allocation, Launch)
Peaks = Mapping[str, "Expr | None"]


def _dim(d: object) -> int | str:
    if d is None:
        return "?"
    return d.value if d.value is not None else d.text  # type: ignore[attr-defined]


def _tensor(t: vm_walk.TensorInfo) -> ModelTensor:
    return ModelTensor(None if t.dims is None else tuple(_dim(d) for d in t.dims), t.dtype, t.offset)


class _Joiner:
    """Per-call launches and workspaces of a VM function: its TIR calls looked up in the host code
    (placed at the position of the call, marked when a CUDA graph replays them), calls of other VM
    functions followed."""

    def __init__(self, walks: dict[str, vm_walk.FunctionWalk], host: HostCode | None) -> None:
        self.walks = walks
        self.host = host

    def collect(self, name: str, items: Sequence[T], depth: int = 0, at: int | None = None) -> tuple[T, ...] | None:
        """The items (launches or allocations of the host code) of the TIR functions one call of
        `name` runs, in call order; None without host code."""
        if self.host is None:
            return None
        out: list[T] = []
        for site in self.walks[name].sites:
            where = site.position if at is None else at
            if site.callee in self.walks and depth < _MAX_DEPTH:
                out += self.collect(site.callee, items, depth + 1, where) or ()
                continue
            for x in items:
                if x.function == site.callee:  # type: ignore[attr-defined]
                    extra = {"replayed": site.replayed} if isinstance(x, Launch) else {}
                    out.append(replace(x, position=where, **extra))  # type: ignore[type-var]
        return tuple(out)


def _alias(host_c: str | None, function: HostFunction) -> bool:
    """Whether a host function only forwards to another (TVM's module "main" entry alias)."""
    body = (host_c or "").splitlines()[function.line:function.end_line - 1]
    return len(body) == 1 and body[0].strip().startswith("return __tvm_ffi_")


def with_ir_sizes(allocations: Sequence[Allocation], facts: MemoryFacts | None) -> list[Allocation]:
    """The host C's workspace allocations, each sized as the build's IR says where the record lists
    the same number of workspaces for the function (in the same order)."""
    if facts is None:
        return list(allocations)
    out = []
    for a in allocations:
        mine = [x for x in allocations if x.function == a.function]
        recorded = facts.host.get(a.function)
        if recorded is not None and len(recorded.workspaces) == len(mine):
            a = replace(a, size=recorded.workspaces[mine.index(a)].size)
        out.append(a)
    return out


def host_peaks(functions: Sequence[HostFunction], allocations: Sequence[Allocation],
               facts: MemoryFacts | None) -> dict[str, Peaks]:
    """Per host function, the most workspace bytes one call holds at once, per device: the record's,
    else from the host C (each workspace alive from its alloc line to its free, or the end)."""
    out: dict[str, Peaks] = {}
    for f in functions:
        if facts is not None and f.name in facts.host:
            out[f.name] = facts.host[f.name].peaks
            continue
        spans = [lifetimes.Span(a.line, a.freed_line or f.end_line, a.size, a.device)
                 for a in allocations if a.function == f.name]
        out[f.name] = lifetimes.peak(spans)
    return out


def _function(name: str, w: vm_walk.FunctionWalk, joiner: _Joiner, host: HostCode | None,
              peaks_of: dict[str, Peaks] | None, recorded: VMFacts | None, device: str) -> VMFunction:
    storages = tuple(ModelStorage(name, i, b.size, b.device, b.scope, b.dtype, tuple(_tensor(t) for t in b.tensors),
                                  b.holds_output, (b.first, b.last), b.cached) for i, b in enumerate(w.storages))
    copies = tuple(ModelCopy(name, c.instruction, c.call, direction(c.source, c.destination),
                             c.tensor.nbytes if c.tensor else None, str(_tensor(c.tensor)) if c.tensor else None,
                             None if c.block is None else (w.blocks[c.block].first, w.blocks[c.block].last),
                             None if c.block is None else w.blocks[c.block].device)
                   for c in w.copies)
    workspaces = joiner.collect(name, host.allocations if host else [])
    launches = joiner.collect(name, host.launches if host else [])
    totals = count_totals(storages, workspaces, copies, launches)
    if recorded is not None:
        peaks: Mapping[str, Expr | None] = recorded.peaks
        totals = Totals(totals.storages, recorded.storage_bytes, totals.workspaces,
                        recorded.workspace_bytes if workspaces is not None else totals.workspace_bytes,
                        totals.copies, totals.copy_bytes, totals.launches, totals.cached_storages,
                        recorded.cached_bytes, totals.replayed)
    else:
        spans = lifetimes.function_spans(w, None if peaks_of is None else lambda callee: peaks_of.get(callee, {}))
        peaks = lifetimes.peak(spans) if spans is not None and peaks_of is not None else \
            {d: None for d in dict.fromkeys(b.device for b in w.blocks)}
    on_device = peaks.get(device, c_expr.constant(0) if device not in {b.device for b in w.blocks} else None)
    return VMFunction(name, w.params, storages, tuple(w.calls), copies, workspaces, launches, totals, dict(peaks),
                      on_device, w.length, tuple(w.folded))


def build(program: VMProgram, devices: tuple[str, ...], host: HostCode | None = None,
          host_c: str | None = None, facts: MemoryFacts | None = None) -> ModelMemory:
    """The model view of a decoded VM executable; host and host_c are the TIR functions' host code,
    facts the build's memory record (None: none)."""
    by_name = {f.name: f for f in host.functions} if host is not None else {}

    def shape_function(name: str) -> dict[int, str] | None:
        fn = by_name.get(name)
        return shape_funcs.heap_writes(host_c, fn) if fn is not None and host_c is not None else None

    hints = facts.ir_sizes() if facts is not None else None
    walks = {f.name: vm_walk.walk(program, f.name, devices, shape_function, hints)
             for f in program.functions if f.kind == "vm"}
    folded = {name for w in walks.values() for name in w.folded}
    joiner = _Joiner(walks, host)
    peaks_of = host_peaks(host.functions, host.allocations, facts) if host is not None else None
    if peaks_of is None and facts is not None:
        peaks_of = {name: h.peaks for name, h in facts.host.items()}
    functions = []
    symbols: dict[str, str] = {}
    notes: list[str] = []
    for name, w in walks.items():
        symbols.update(w.symbols)
        if name in folded:
            continue
        functions.append(_function(name, w, joiner, host, peaks_of, facts.vm.get(name) if facts else None,
                                   devices[0]))
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
                 host_c: str | None = None, facts: MemoryFacts | None = None) -> ModelMemory | None:
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
    return build(vm_program.parse(payload), vm_walk.devices_for(kind), host, host_c, facts)
