"""A trace as Chrome trace events (formats/chrome_trace.py), with CUPTI's real times: one track
for the calls (each window a slice), one for kernels (those a CUDA graph replayed are named so),
one for copies and memsets, one for device memory with each allocation's lifetime as an async
slice (allocation to release, matched by address), and a counter of the device bytes in use."""
from __future__ import annotations

from typing import Any, Sequence

from ..formats import chrome_trace
from .events import CopyEvent, Event, KernelEvent, MemoryEvent, MemsetEvent, Window

CALLS, KERNELS, COPIES, MEMORY = 1, 2, 3, 4


def _us(ns: int, origin: int) -> float:
    return (ns - origin) / 1000.0


def _memory(events: Sequence[MemoryEvent], origin: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    open_at: dict[int, MemoryEvent] = {}
    now, ident = 0, 0
    ordered = sorted(events, key=lambda e: (e.time, e.operation == "allocation"))
    end = ordered[-1].time if ordered else origin
    for e in ordered:
        if e.operation == "allocation":
            open_at[e.address] = e
            now += e.bytes if e.memory_kind == "device" else 0
        elif e.address in open_at:
            start = open_at.pop(e.address)
            ident += 1
            out += chrome_trace.async_slice(f"{start.bytes} B {start.memory_kind}", _us(start.time, origin),
                                            _us(e.time, origin), MEMORY, "allocation", ident,
                                            {"bytes": start.bytes, "kind": start.memory_kind})
            now -= start.bytes if start.memory_kind == "device" else 0
        out.append(chrome_trace.counter("device bytes in use", _us(e.time, origin), {"bytes": now}))
    for start in open_at.values():           # still allocated when the trace ended
        ident += 1
        out += chrome_trace.async_slice(f"{start.bytes} B {start.memory_kind} (not released)",
                                        _us(start.time, origin), _us(end, origin), MEMORY, "allocation", ident,
                                        {"bytes": start.bytes, "kind": start.memory_kind})
    return out


def document(events: Sequence[Event], windows: Sequence[Window], label: str) -> dict[str, Any]:
    """The trace's events and call windows as one Chrome trace document (times from the first)."""
    origin = min([e.time for e in events] + [w.start for w in windows], default=0)
    out = [chrome_trace.process_name(label)] + [chrome_trace.track_name(t, n) for t, n in
                                                 ((CALLS, "calls"), (KERNELS, "kernels"),
                                                  (COPIES, "copies and memsets"), (MEMORY, "device memory"))]
    out += [chrome_trace.complete(w.label, _us(w.start, origin), (w.end - w.start) / 1000.0, CALLS, "call")
            for w in windows]
    for e in events:
        if isinstance(e, KernelEvent):
            out.append(chrome_trace.complete(e.name + (" (replayed)" if e.replayed else ""), _us(e.start, origin),
                                             e.duration / 1000.0, KERNELS, "kernel",
                                             {"grid": list(e.grid), "block": list(e.block), "registers": e.registers,
                                              "graph_id": e.graph_id}))
        elif isinstance(e, CopyEvent):
            out.append(chrome_trace.complete(f"copy {e.direction}", _us(e.start, origin), e.duration / 1000.0,
                                             COPIES, "copy", {"bytes": e.bytes}))
        elif isinstance(e, MemsetEvent):
            out.append(chrome_trace.complete("memset", _us(e.start, origin), e.duration / 1000.0, COPIES,
                                             "memset", {"bytes": e.bytes}))
    out += _memory([e for e in events if isinstance(e, MemoryEvent)], origin)
    return chrome_trace.document(out, unit="ns", source=label)
