"""How jitflow writes numbers and tables for people: byte sizes in binary units, durations, plurals,
aligned columns. The command line, inspect's report and a trace's text all print through here, so
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
