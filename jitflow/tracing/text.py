"""The plain-text form of a Trace: one row per part (before the first call, each call, between,
total), the kernels launched, and how the trace agrees with the report."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..report.text import table
from .summary import Amount, Segment

if TYPE_CHECKING:
    from .session import Trace

_DIRECTIONS = ("host->device", "device->host", "device->device")


def nbytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def duration(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def amount(a: Amount, timed: bool = False) -> str:
    if not a.count:
        return "-"
    text = f"{a.count}, {nbytes(a.bytes)}"
    return text + (f", {duration(a.time_ns)}" if timed else "")


def _row(seg: Segment, directions: list[str]) -> list[str]:
    kinds = [k for k in seg.allocations_by_kind if k != "device"]
    allocs = amount(seg.allocations) + (f" ({', '.join(kinds)})" if kinds else "")
    return ([seg.label, allocs, amount(seg.releases)] + [amount(seg.copy(d), True) for d in directions]
            + [amount(seg.memsets, True), str(len(seg.launches)) if seg.launches else "-",
               duration(seg.kernel_time_ns) if seg.launches else "-"])


def render(t: Trace) -> str:
    total = t.total
    directions = [d for d in _DIRECTIONS if d in total.copies] + \
        [d for d in total.copies if d not in _DIRECTIONS] or ["host->device"]
    parts = [t.before] + list(t.calls) + ([t.between] if not t.between.empty else []) + [total]
    lines = [f"jitflow trace: {len(t.calls)} call{'s' if len(t.calls) != 1 else ''}"
             + (f" of {t.function}" if t.report is not None else "") + " (what the CUDA driver did)"]
    lines += table(["", "allocations", "releases"] + [f"copies {d}" for d in directions]
                   + ["memsets", "launches", "kernel time"], [_row(s, directions) for s in parts])
    known = {k.name for k in t.report.kernels} if t.report is not None else None
    if t.kernels:
        lines += ["", "kernels:"]
        rows = []
        for k in t.kernels:
            rows.append([k.name, str(k.launches), "/".join(str(g) for g in k.grids),
                         "/".join(str(b) for b in k.blocks), duration(k.mean_ns)]
                        + ([] if known is None else ["yes" if k.name in known else "no"]))
        lines += table(["name", "launches", "grid", "block", "mean time"]
                       + ([] if known is None else ["in the report"]), rows)
    if t.agreement is not None:
        verdict = "agrees with" if t.agreement.ok else "does not agree with"
        lines += ["", f"the trace {verdict} the report:"] + [f"  - {x}" for x in t.agreement.lines()]
    lines += ["", "allocations are what the CUDA driver was asked for: TVM's pooled allocator (the VM's default) "
                  "keeps freed blocks for reuse, so a first call allocates and later calls usually do not"]
    return "\n".join(lines)
