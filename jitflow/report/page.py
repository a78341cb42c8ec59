"""The picture of a memory plan: an SVG drawing and a self-contained HTML page around it.

For each plan (a VM function's call, or a host function of a library of kernels): one bar per
storage block over the positions where it is alive (a CUDA graph's cached storage across the whole
call), the bytes in use below them as a step curve with the peak marked and labelled, the kernels in
the order they run, and the totals. Several plans (a --diff) are drawn one above the other on one
scale. The page holds its CSS and script inline and loads nothing from the network.
"""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field
from typing import Sequence

from ..text.format import exact_bytes
from . import timeline
from .memory_plan import VMFunction
from .types import Allocation, HostFunction, Launch

WIDTH, LEFT, LANE, CHART = 960, 190, 18, 120
_COLORS = {"cuda": "#3b78c2", "cpu": "#4f9a58"}


@dataclass(frozen=True)
class Bar:
    label: str
    first: int
    last: int
    size: int
    device: str
    cached: bool
    detail: str


@dataclass
class Plan:
    """What one drawing of a plan shows (sizes are numbers)."""

    title: str
    length: int
    bars: list[Bar]
    usage: dict[str, list[int]]
    peak: int
    kernels: list[tuple[int, str, bool]] = field(default_factory=list)     # position, kernel, replayed
    totals: list[str] = field(default_factory=list)
    axis: str = "position in the bytecode"


def of_function(f: VMFunction, label: str = "") -> Plan:
    """The plan of one call of a VM function (its sizes must be numbers: evaluate at a shape first)."""
    usage = timeline.in_use(f)
    length = len(next(iter(usage.values()), [0])) or 1
    bars = [Bar(f"#{s.index} {exact_bytes(timeline.number(s.size, f'{f.name} storage #{s.index}'))}",
                0 if s.cached or s.live is None else s.live[0], length - 1 if s.cached or s.live is None else s.live[1],
                timeline.number(s.size, f"storage #{s.index}"), s.device, s.cached,
                ", ".join(str(t) for t in s.tensors) + (" (output)" if s.holds_output else "")
                + (" (cached: allocated once)" if s.cached else "")) for s in f.storages]
    peak = max((max(v) for v in usage.values()), default=0)
    t = f.totals
    totals = [f"peak {exact_bytes(peak)}",
              f"{t.storages} storage blocks per call, {exact_bytes(timeline.number(t.storage_bytes, 'storage'))}"
              if t else "", f"{len(f.launches or ())} launches" + (f" ({t.replayed} replayed)" if t and t.replayed
                                                                   else "")]
    if t and t.cached_storages:
        totals.append(f"{t.cached_storages} cached blocks (allocated once), "
                      f"{exact_bytes(timeline.number(t.cached_bytes, 'cached storage'))}")
    kernels = [(x.position if x.position is not None else 0, x.kernel, x.replayed) for x in f.launches or ()]
    return Plan(f"{label}{f.name}: one call", length, bars, usage, peak, kernels, [x for x in totals if x])


def of_host(f: HostFunction, allocations: Sequence[Allocation], launches: Sequence[Launch], device: str,
            label: str = "") -> Plan:
    """The plan of one call of a host function: its workspaces over its host-C lines."""
    mine = [a for a in allocations if a.function == f.name]
    length = f.end_line - f.line + 1
    usage = [0] * length
    bars = []
    for a in mine:
        size = timeline.number(a.size, f"{f.name} {a.buffer}")
        first, last = a.line - f.line, (a.freed_line or f.end_line) - f.line
        bars.append(Bar(f"{a.buffer} {exact_bytes(size)}", first, last, size, a.device, False,
                        f"{a.dtype}, host.c:{a.line}"))
        for p in range(first, last + 1):
            usage[p] += size
    kernels = [(x.line - f.line, x.kernel, False) for x in launches if x.function == f.name]
    return Plan(f"{label}{f.name} (host.c:{f.line}-{f.end_line})", length, bars, {device: usage}, max(usage),
                kernels, [f"peak {exact_bytes(max(usage))}", f"{len(mine)} workspaces", f"{len(kernels)} launches"],
                f"host-C line after {f.line}")


def _plan_svg(p: Plan, top: float, scale_x: float, max_bytes: int) -> tuple[list[str], float]:
    out = [f'<text class="title" x="4" y="{top + 14}">{html.escape(p.title)}</text>']
    y = top + 24
    for i, b in enumerate(p.bars):
        x0, x1 = LEFT + b.first * scale_x, LEFT + (b.last + 1) * scale_x
        color = _COLORS.get(b.device, "#8a6fb0")
        out.append(f'<text class="lane" x="4" y="{y + 13}">{html.escape(b.label)}</text>')
        out.append(f'<rect class="block{" cached" if b.cached else ""}" data-index="{i}" x="{x0:.1f}" y="{y + 2}" '
                   f'width="{max(x1 - x0, 1):.1f}" height="{LANE - 4}" fill="{color}" '
                   f'fill-opacity="{0.35 if b.cached else 0.85}"><title>{html.escape(b.label)}: '
                   f'{html.escape(b.detail)}; live {b.first}-{b.last}</title></rect>')
        y += LANE
    base = y + CHART + 22                    # room above the chart for the peak's label
    height = CHART / max(max_bytes, 1)
    for device, values in p.usage.items():
        points = [f"{LEFT:.1f},{base:.1f}"]
        for pos, v in enumerate(values):
            points += [f"{LEFT + pos * scale_x:.1f},{base - v * height:.1f}",
                       f"{LEFT + (pos + 1) * scale_x:.1f},{base - v * height:.1f}"]
        points.append(f"{LEFT + len(values) * scale_x:.1f},{base:.1f}")
        out.append(f'<polyline class="usage" data-device="{device}" points="{" ".join(points)}" fill="none" '
                   f'stroke="{_COLORS.get(device, "#8a6fb0")}" stroke-width="2"/>')
    peak_y = base - p.peak * height
    out.append(f'<line class="peak" x1="{LEFT}" x2="{WIDTH - 10}" y1="{peak_y:.1f}" y2="{peak_y:.1f}" '
               'stroke="#c0392b" stroke-dasharray="5,3"/>')
    out.append(f'<text class="peak-label" x="{WIDTH - 12}" y="{peak_y - 4:.1f}" text-anchor="end">'
               f'peak {html.escape(exact_bytes(p.peak))}</text>')
    out.append(f'<text class="lane" x="4" y="{base - CHART / 2:.1f}">bytes in use</text>')
    out.append(f'<text class="axis" x="{LEFT}" y="{base + 13:.1f}" font-size="10">0</text>')
    out.append(f'<text class="axis" x="{LEFT + p.length * scale_x:.1f}" y="{base + 13:.1f}" font-size="10" '
               f'text-anchor="end">{p.length - 1} ({html.escape(p.axis)})</text>')
    y = base + 26
    for pos, name, replayed in p.kernels:
        x = LEFT + (pos + 0.5) * scale_x
        out.append(f'<circle class="kernel" cx="{x:.1f}" cy="{y - 4}" r="3" fill="{"#e67e22" if replayed else "#333"}">'
                   f'<title>{html.escape(name)}{" (replayed from a CUDA graph)" if replayed else ""} at {pos}'
                   '</title></circle>')
    if p.kernels:
        names = ", ".join(n + (" (replayed)" if r else "") for _, n, r in p.kernels)
        for line in textwrap.wrap(f"kernels in order: {names}", 150):
            out.append(f'<text class="kernels" x="4" y="{y + 14}">{html.escape(line)}</text>')
            y += 16
    out.append(f'<text class="totals" x="4" y="{y + 16}">{html.escape("; ".join(p.totals))}</text>')
    return out, y + 30


def svg(plans: Sequence[Plan]) -> str:
    """One SVG with the plans one above the other, on one scale (positions and bytes)."""
    longest = max((p.length for p in plans), default=1)
    scale_x = (WIDTH - LEFT - 12) / max(longest, 1)
    max_bytes = max((p.peak for p in plans), default=1)
    parts: list[str] = []
    top = 4.0
    for p in plans:
        drawn, top = _plan_svg(p, top, scale_x, max_bytes)
        parts += drawn
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="plan" width="{WIDTH}" height="{top:.0f}" '
            f'viewBox="0 0 {WIDTH} {top:.0f}" font-family="sans-serif" font-size="12">'
            f'<rect x="0" y="0" width="{WIDTH}" height="{top:.0f}" fill="#fff"/>' + "".join(parts) + "</svg>")


_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.2em}
.block:hover{stroke:#000;stroke-width:1.5}.title{font-weight:bold}#detail{min-height:1.4em;color:#444}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}"""
_SCRIPT = """(function(){var blocks=document.querySelectorAll('rect.block');
var detail=document.getElementById('detail');
blocks.forEach(function(b){b.addEventListener('mouseover',function(){detail.textContent=b.textContent;});});
var peaks=Array.prototype.map.call(document.querySelectorAll('text.peak-label'),function(t){return t.textContent;});
document.getElementById('status').textContent='drawn: '+blocks.length+' blocks; '+peaks.join(', ');})();"""


def document(title: str, plans: Sequence[Plan], text: str) -> str:
    """The HTML page: the drawing, a line the script fills in, and the report's text."""
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title><style>"
            + _CSS + "</style></head><body><h1>" + html.escape(title) + "</h1>" + svg(plans)
            + '<p id="detail"></p><p id="status">not drawn (the page script did not run)</p><pre>'
            + html.escape(text) + "</pre><script>" + _SCRIPT + "</script></body></html>")
