"""A report's memory plan as Chrome trace events (formats/chrome_trace.py), for Perfetto and
chrome://tracing: one process per VM function (per host function for a library of kernels), one
track per device with each storage block's lifetime as an async slice, the kernel launches and
copies in call order, and a counter of the bytes in use whose largest value is the call's peak.

A static plan has no times: each bytecode position (each host-C line of a host function) is given
STEP microseconds. Sizes must be numbers: a symbolic model is evaluated at a shape first, and the
shape is then said in each process's name and in the document's "shape".
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import InvalidInputError
from ..formats import chrome_trace, lifetimes
from ..formats.c_expr import Expr
from .memory_plan import ModelMemory, VMFunction
from .text import shape_text
from .types import Allocation, HostFunction, Launch

STEP = 10.0           # microseconds per position
_OPEN = 1 << 40       # a workspace never freed: alive to the end of its call


def number(size: Expr | None, what: str) -> int:
    if size is None:
        raise InvalidInputError(f"{what}: its size is not known here, so the timeline cannot draw it")
    if size.value is None:
        names = ", ".join(size.symbols)
        raise InvalidInputError(f"{what} is {size.text} B: give the shape to draw it, e.g. "
                                f"--shape {names.split(', ')[0]}=32 (rep.evaluate({names.split(', ')[0]}=32))")
    return size.value


def workspace_at(workspaces: Sequence[Allocation], position: int) -> dict[str, int]:
    """device -> the most workspace bytes the TIR call at `position` holds at once (host-C lines)."""
    mine = [a for a in workspaces if a.position == position]
    spans = [lifetimes.Span(a.line, a.freed_line or _OPEN, a.size, a.device) for a in mine]
    return {d: number(p, f"a workspace at position {position}") for d, p in lifetimes.peak(spans).items()}


def in_use(f: VMFunction) -> dict[str, list[int]]:
    """device -> bytes in use at each position of one call (the call's storage and workspaces)."""
    length = f.length or 1 + max([s.live[1] for s in f.storages if s.live] + [0])
    out: dict[str, list[int]] = {}
    for s in f.storages:
        out.setdefault(s.device, [0] * length)
        if s.cached or s.live is None:
            continue
        size = number(s.size, f"{f.name} storage #{s.index}")
        for p in range(s.live[0], min(s.live[1], length - 1) + 1):
            out[s.device][p] += size
    for c in f.copies:
        if c.live is not None and c.device is not None:     # a to_device's new tensor
            size = number(c.size, f"{f.name} copy at {c.instruction}")
            for p in range(c.live[0], min(c.live[1], length - 1) + 1):
                out.setdefault(c.device, [0] * length)[p] += size
    for p in sorted({a.position for a in f.workspaces or () if a.position is not None}):
        for device, n in workspace_at(f.workspaces or (), p).items():
            out.setdefault(device, [0] * length)[p] += n
    return out


def _launches(launches: Sequence[Launch], tid: int, pid: int, origin: int = 0) -> list[dict[str, Any]]:
    events = []
    by_position: dict[int, list[Launch]] = {}
    for x in launches:
        by_position.setdefault(x.position if x.position is not None else x.line - origin, []).append(x)
    for p, group in by_position.items():
        for i, x in enumerate(group):
            events.append(chrome_trace.complete(x.kernel + (" (replayed)" if x.replayed else ""),
                                                (p + i / len(group)) * STEP, STEP / len(group), tid, "launch",
                                                {"grid": [d.text for d in x.grid], "block": [d.text for d in x.block],
                                                 "function": x.function, "host_c_line": x.line,
                                                 "replayed": x.replayed}, pid))
    return events


def _counters(usage: dict[str, list[int]], pid: int) -> list[dict[str, Any]]:
    events = []
    for device, values in usage.items():
        last = None
        for p, v in enumerate(values):
            if v != last:
                events.append(chrome_trace.counter(f"{device} bytes in use", p * STEP, {"bytes": v}, pid))
                last = v
    return events


def _at(shape: Mapping[str, int] | None) -> str:
    return f" at {shape_text(shape)}" if shape else ""


def function_events(f: VMFunction, devices: Sequence[str], pid: int,
                    shape: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """The events of one VM function (process `pid`), at `shape` (the symbols bound, to name it)."""
    tids = {d: i + 1 for i, d in enumerate(dict.fromkeys([*devices, *(s.device for s in f.storages)]))}
    length = f.length or 1 + max([s.live[1] for s in f.storages if s.live] + [0])
    events = [chrome_trace.process_name(f"{f.name} (one call{_at(shape)}; {STEP:g} us per bytecode position)",
                                        pid)]
    events += [chrome_trace.track_name(t, f"{d}", pid) for d, t in tids.items()]
    for s in f.storages:
        size = number(s.size, f"{f.name} storage #{s.index}")
        first, last = (0, length - 1) if s.cached or s.live is None else s.live
        name = f"#{s.index} {size} B" + (" cached" if s.cached else "") + (" (output)" if s.holds_output else "")
        events += chrome_trace.async_slice(name, first * STEP, (last + 1) * STEP, tids[s.device], "storage",
                                           pid * 1000 + s.index,
                                           {"bytes": size, "tensors": [str(t) for t in s.tensors],
                                            "live": [first, last], "cached": s.cached}, pid)
    events += _launches(f.launches or (), tids[devices[0]], pid)
    for c in f.copies:
        events.append(chrome_trace.complete(f"{c.call} ({c.direction})", c.instruction * STEP, STEP,
                                            tids[devices[0]], "copy", {"tensor": c.tensor}, pid))
    return events + _counters(in_use(f), pid)


def model_document(model: ModelMemory, label: str, shape: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A Relax model: each VM function's call, at `shape` (the symbols the report was evaluated at)."""
    events = []
    for pid, f in enumerate(model.functions, 1):
        events += function_events(f, model.devices, pid, shape)
    peaks = {f.name: None if f.peak is None else f.peak.value for f in model.functions}
    return chrome_trace.document(events, source=label + _at(shape), peak_bytes=peaks, shape=dict(shape or {}))


def host_document(functions: Sequence[HostFunction], allocations: Sequence[Allocation],
                  launches: Sequence[Launch], device: str, label: str,
                  shape: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A library of kernels: each host function's workspaces over its host-C lines, its launches."""
    events = []
    for pid, f in enumerate(functions, 1):
        mine = [a for a in allocations if a.function == f.name]
        events += [chrome_trace.process_name(f"{f.name} (host.c:{f.line}-{f.end_line}{_at(shape)}; "
                                             f"{STEP:g} us per line)", pid),
                   chrome_trace.track_name(1, device, pid)]
        usage = [0] * (f.end_line - f.line + 1)
        for i, a in enumerate(mine):
            size = number(a.size, f"{f.name} {a.buffer}")
            first, last = a.line - f.line, (a.freed_line or f.end_line) - f.line
            events += chrome_trace.async_slice(f"{a.buffer} {size} B", first * STEP, (last + 1) * STEP, 1,
                                               "workspace", pid * 1000 + i, {"bytes": size, "line": a.line}, pid)
            for p in range(first, last + 1):
                usage[p] += size
        events += _launches([x for x in launches if x.function == f.name], 1, pid, f.line)
        events += _counters({device: usage}, pid)
    return chrome_trace.document(events, source=label + _at(shape), shape=dict(shape or {}),
                                 peak_bytes={f.name: None if f.peak is None else f.peak.value for f in functions})
