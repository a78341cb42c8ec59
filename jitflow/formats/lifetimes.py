"""From lifetimes to the peak: the most bytes alive at one position, per device.

A span is something that holds device memory from one position to another: a storage block of a VM
function (positions in its bytecode), the workspaces of the TIR function a VM instruction calls
(held at that one position), a workspace of a TIR host function (between the host-C lines of its
alloc and free). The peak is the largest sum of sizes of spans alive together: a number where every
size is one, else `max(...)` of the sums of the sets of spans that no other set contains (sizes are
never negative, so a subset never sums to more). The build simplifies that text further with TVM's
arithmetic; without the build's record it is shown as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from . import c_expr
from .c_expr import Expr
from .vm_walk import FunctionWalk

#: The workspace peak (device -> bytes) of one call of a TIR function, or None where unknown.
WorkspacePeak = Callable[[str], "Mapping[str, Expr | None] | None"]


@dataclass(frozen=True)
class Span:
    """Memory held from position `first` to `last` (both included) on `device`."""

    first: int
    last: int
    size: Expr | None
    device: str


def peak(spans: Sequence[Span]) -> dict[str, Expr | None]:
    """device -> the most bytes alive at once (None when a span that counts has no known size)."""
    out: dict[str, Expr | None] = {}
    for device in dict.fromkeys(s.device for s in spans):
        mine = [s for s in spans if s.device == device]
        sets = {frozenset(i for i, s in enumerate(mine) if s.first <= p <= s.last) for p in {s.first for s in mine}}
        maximal = sorted((a for a in sets if not any(a < b for b in sets)), key=min)
        if any(mine[i].size is None for a in maximal for i in a):
            out[device] = None
            continue
        sums = [c_expr.total([mine[i].size for i in sorted(a)]) for a in maximal]  # type: ignore[misc]
        out[device] = c_expr.maximum(sums)
    return out


def function_spans(walk: FunctionWalk, workspaces: WorkspacePeak | None = None) -> list[Span] | None:
    """The spans of one call of a VM function: its blocks (not a CUDA graph's cached storage) and
    the workspaces of each TIR function it calls; None when a called function's workspaces are
    unknown."""
    spans = [Span(b.first, b.last, b.size, b.device) for b in walk.blocks if not b.cached]
    for site in walk.sites:
        held = workspaces(site.callee) if workspaces is not None else {}
        if held is None:
            return None
        spans += [Span(site.position, site.position, size, device) for device, size in held.items()]
    return spans


def totals(walk: FunctionWalk) -> dict[str, Expr | None]:
    """Bytes of storage one call allocates (`storage`), and a CUDA graph's storage allocated once
    (`cached`); None where a size is not known."""
    def add(blocks: list) -> Expr | None:
        sizes = [b.size for b in blocks]
        return None if any(s is None for s in sizes) else c_expr.total(sizes)

    storages = walk.storages
    return {"storage": add([b for b in storages if not b.cached]), "cached": add([b for b in storages if b.cached])}
