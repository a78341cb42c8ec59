"""Add up a trace's events: before the first call (loading, the VM's start-up), per call, between
calls, and in total; and per kernel over the whole trace. Pure functions of events and windows."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .events import CopyEvent, Event, KernelEvent, KernelLaunch, MemoryEvent, MemsetEvent, Window


@dataclass(frozen=True)
class Amount:
    """How many, how many bytes, and how long on the GPU (ns; 0 where it does not apply)."""

    count: int = 0
    bytes: int = 0
    time_ns: int = 0

    def __add__(self, other: "Amount") -> "Amount":
        return Amount(self.count + other.count, self.bytes + other.bytes, self.time_ns + other.time_ns)

    def to_json(self) -> dict[str, int]:
        return {"count": self.count, "bytes": self.bytes, "time_ns": self.time_ns}


@dataclass(frozen=True)
class Segment:
    """What the driver did in one part of a trace (a call, the start-up, ...)."""

    label: str
    allocations: Amount = Amount()                      # every memory kind
    releases: Amount = Amount()
    allocations_by_kind: dict[str, Amount] = field(default_factory=dict)   # "device", "device_static", ...
    copies: dict[str, Amount] = field(default_factory=dict)                # direction -> amount
    memsets: Amount = Amount()
    launches: tuple[KernelLaunch, ...] = ()
    peak_in_use: int = 0        # the most device bytes allocated in this part and not yet released


    def copy(self, direction: str) -> Amount:
        """The copies in one direction ("host->device", "device->host", "device->device")."""
        return self.copies.get(direction, Amount())

    def allocated(self, kind: str = "device") -> Amount:
        """The allocations of one memory kind ("device" for cudaMalloc's)."""
        return self.allocations_by_kind.get(kind, Amount())

    @property
    def kernel_time_ns(self) -> int:
        return sum(x.time_ns for x in self.launches)

    @property
    def kernels(self) -> list[str]:
        """The names of the kernels launched, in the order they ran."""
        return [x.kernel for x in self.launches]

    @property
    def empty(self) -> bool:
        return not (self.allocations.count or self.releases.count or self.copies or self.memsets.count
                    or self.launches)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "allocations": self.allocations.to_json(),
                "allocations_by_kind": {k: v.to_json() for k, v in self.allocations_by_kind.items()},
                "releases": self.releases.to_json(),
                "copies": {k: v.to_json() for k, v in self.copies.items()}, "memsets": self.memsets.to_json(),
                "launches": [x.to_json() for x in self.launches], "kernel_time_ns": self.kernel_time_ns,
                "peak_in_use": self.peak_in_use}


def segment(label: str, events: Iterable[Event]) -> Segment:
    """Add up events into a Segment."""
    events = list(events)
    allocations, releases, memsets = Amount(), Amount(), Amount()
    by_kind: dict[str, Amount] = {}
    copies: dict[str, Amount] = {}
    launches: list[KernelLaunch] = []
    for e in events:
        if isinstance(e, MemoryEvent):
            one = Amount(1, e.bytes)
            if e.operation == "allocation":
                allocations += one
                by_kind[e.memory_kind] = by_kind.get(e.memory_kind, Amount()) + one
            else:
                releases += one
        elif isinstance(e, CopyEvent):
            copies[e.direction] = copies.get(e.direction, Amount()) + Amount(1, e.bytes, e.duration)
        elif isinstance(e, MemsetEvent):
            memsets += Amount(1, e.bytes, e.duration)
        elif isinstance(e, KernelEvent):
            launches.append(e)
    launches.sort(key=lambda x: x.start)
    return Segment(label, allocations, releases, by_kind, copies, memsets, tuple(launches), peak_in_use(events))


def peak_in_use(events: Iterable[Event], kind: str = "device") -> int:
    """The most bytes of memory `kind` allocated by these events and not yet released, counted from
    zero at the first of them (a release of memory allocated before counts as nothing)."""
    live: dict[int, int] = {}
    now = peak = 0
    for e in sorted((e for e in events if isinstance(e, MemoryEvent) and e.memory_kind == kind),
                    key=lambda e: (e.time, e.operation == "allocation")):
        if e.operation == "allocation":
            live[e.address] = live.get(e.address, 0) + e.bytes
            now += e.bytes
            peak = max(peak, now)
        elif e.address in live:
            now -= live.pop(e.address)
    return peak


@dataclass(frozen=True)
class Split:
    """A trace's events split by its call windows."""

    before: Segment               # before the first call: loading the library, starting the VM
    calls: tuple[Segment, ...]
    between: Segment              # between calls and after the last one
    total: Segment


def split(events: Sequence[Event], windows: Sequence[Window]) -> Split:
    """Split events by call windows: an event belongs to the window its time falls in (a copy or
    kernel by its start on the GPU, an allocation by the time of the call that made it)."""
    ordered = sorted(windows, key=lambda w: w.start)
    first = ordered[0].start if ordered else None
    per_call: list[list[Event]] = [[] for _ in ordered]
    before: list[Event] = []
    between: list[Event] = []
    for e in events:
        index = next((i for i, w in enumerate(ordered) if w.start <= e.time <= w.end), None)
        if index is not None:
            per_call[index].append(e)
        elif first is None or e.time < first:
            before.append(e)
        else:
            between.append(e)
    return Split(segment("before the first call" if ordered else "whole trace", before),
                 tuple(segment(w.label, evs) for w, evs in zip(ordered, per_call)),
                 segment("between and after calls", between), segment("total", events))


@dataclass(frozen=True)
class KernelTotal:
    """One kernel over the whole trace: launches, the grids and blocks seen, its GPU time."""

    name: str
    launches: int
    grids: tuple[tuple[int, int, int], ...]
    blocks: tuple[tuple[int, int, int], ...]
    time_ns: int

    @property
    def mean_ns(self) -> float:
        return self.time_ns / self.launches if self.launches else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "launches": self.launches, "grids": [list(g) for g in self.grids],
                "blocks": [list(b) for b in self.blocks], "time_ns": self.time_ns}


def kernel_totals(total: Segment) -> list[KernelTotal]:
    """Per kernel name, in order of first launch."""
    names = list(dict.fromkeys(total.kernels))
    out = []
    for name in names:
        mine = [x for x in total.launches if x.kernel == name]
        out.append(KernelTotal(name, len(mine), tuple(dict.fromkeys(x.grid for x in mine)),
                               tuple(dict.fromkeys(x.block for x in mine)), sum(x.time_ns for x in mine)))
    return out
