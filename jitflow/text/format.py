"""How jitflow writes numbers and tables for people: byte sizes in binary units, durations, plurals,
articles, aligned columns. The command line, inspect's report and a trace's text all print through here, so
a size or a table reads the same everywhere. Imports nothing from jitflow: any module may use it.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def byte_size(n: float) -> str:
    """Bytes in binary units: '512 B', '27.9 KiB', '3.7 GiB'."""
    for unit in _UNITS:
        if n < 1024 or unit == _UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def exact_bytes(n: int) -> str:
    """The exact count, with binary units beside it from 1 KiB on: '320 B', '4096 B (4.0 KiB)'."""
    return f"{n} B" if abs(n) < 1024 else f"{n} B ({byte_size(n)})"


def duration_ns(ns: float) -> str:
    """A GPU-scale duration given in nanoseconds: '3.5 us', '1.25 ms'."""
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def age(seconds: float) -> str:
    """A duration in the largest whole unit that fits: '12 s', '5 min', '3 h', '41 days'."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return plural(n, unit) if unit == "day" else f"{n} {unit}"
    return f"{max(0, int(seconds))} s"


#: one unit of each precision `durations` writes at, and the largest duration it serves (seconds)
_PRECISIONS = ((0.01, 60.0), (1.0, 3600.0), (60.0, 86400.0), (3600.0, float("inf")))


def _at_precision(seconds: float, step: float) -> str:
    if step < 1:
        return f"{seconds:.2f} s"
    n = round(seconds / step)
    units = {1.0: ("min", "s", 60), 60.0: ("h", "min", 60), 3600.0: ("day", "h", 24)}[step]
    big, small = divmod(n, units[2])
    if not big:
        return f"{small} {units[1]}"
    first = plural(big, units[0]) if units[0] == "day" else f"{big} {units[0]}"
    return first + (f" {small} {units[1]}" if small else "")


def durations(*seconds: float) -> list[str]:
    """Durations written side by side at one precision, the one the largest needs: '10.84 s' and
    '3.20 s'; '11 s' and '1 min 15 s'; '7 min' and '2 h 5 min'; '3 h' and '2 days 4 h'."""
    largest = max((abs(s) for s in seconds), default=0.0)
    step = next(step for step, up_to in _PRECISIONS if largest < up_to - step / 2)
    return [_at_precision(s, step) for s in seconds]


def article(name: str) -> str:
    """'a' or 'an', for a name as it is read out: 'an aarch64-linux-gnu', 'an x86_64-linux-gnu', 'an
    int8', 'an IRModule', 'a uint8', 'a float16', 'a cuda'."""
    first = name[:1].lower()
    return "an" if first in "aeio" or name.lower().startswith(("x86", "sm_")) else "a"


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """'1 entry', '2 entries', '0 entries'."""
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], indent: str = "",
          right: Sequence[int] = ()) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart, each line after `indent`; the columns
    whose index is in `right` align right, the others left; trailing blanks are cut."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append((indent + "  ".join(parts)).rstrip())
    return lines
