"""The plain-text form of a trace: one row per part (before the first call, each call, between,
total), the kernels launched, and how the trace agrees with the report. It prints the parts it is
given (session.py hands them over), in the sizes and columns of text_format."""
from __future__ import annotations

from typing import Collection, Sequence

from ..text.format import byte_size, duration_ns, table
from .match import Agreement
from .summary import Amount, KernelTotal, Segment, Split

_DIRECTIONS = ("host->device", "device->host", "device->device")
POOLED = ("allocations are what the CUDA driver was asked for: TVM's pooled allocator (the VM's default) "
          "keeps freed blocks for reuse, so a first call allocates and later calls usually do not")


def amount(a: Amount, timed: bool = False) -> str:
    if not a.count:
        return "-"
    text = f"{a.count}, {byte_size(a.bytes)}"
    return text + (f", {duration_ns(a.time_ns)}" if timed else "")


def _row(seg: Segment, directions: list[str]) -> list[str]:
    kinds = [k for k in seg.allocations_by_kind if k != "device"]
    allocs = amount(seg.allocations) + (f" ({', '.join(kinds)})" if kinds else "")
    return ([seg.label, allocs, amount(seg.releases)] + [amount(seg.copy(d), True) for d in directions]
            + [amount(seg.memsets, True), str(len(seg.launches)) if seg.launches else "-",
               duration_ns(seg.kernel_time_ns) if seg.launches else "-"])


def render(parts: Split, kernels: Sequence[KernelTotal], agreement: Agreement | None, function: str | None,
           known: Collection[str] | None) -> str:
    """The trace as text: `function` is named when a report was given; `known` are the report's
    kernels (None without a report)."""
    total = parts.total
    directions = [d for d in _DIRECTIONS if d in total.copies] + \
        [d for d in total.copies if d not in _DIRECTIONS] or ["host->device"]
    rows = [parts.before] + list(parts.calls) + ([parts.between] if not parts.between.empty else []) + [total]
    n = len(parts.calls)
    lines = [f"jitflow trace: {n} call{'s' if n != 1 else ''}" + (f" of {function}" if function else "")
             + " (what the CUDA driver did)"]
    lines += table(["", "allocations", "releases"] + [f"copies {d}" for d in directions]
                   + ["memsets", "launches", "kernel time"], [_row(s, directions) for s in rows], indent="  ")
    if kernels:
        lines += ["", "kernels:"]
        body = [[k.name, str(k.launches), "/".join(str(g) for g in k.grids), "/".join(str(b) for b in k.blocks),
                 duration_ns(k.mean_ns)] + ([] if known is None else ["yes" if k.name in known else "no"])
                for k in kernels]
        lines += table(["name", "launches", "grid", "block", "mean time"]
                       + ([] if known is None else ["in the report"]), body, indent="  ")
    if agreement is not None:
        verdict = "agrees with" if agreement.ok else "does not agree with"
        lines += ["", f"the trace {verdict} the report:"] + [f"  - {x}" for x in agreement.lines()]
    lines += ["", POOLED]
    return "\n".join(lines)
