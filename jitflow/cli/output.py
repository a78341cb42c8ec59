"""How commands print: sizes in KiB/MiB/GiB (as inspect prints them), plurals, aligned columns, JSON."""
from __future__ import annotations

import json
import time
from typing import Any, Iterable, Sequence

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_size(n: float) -> str:
    """Bytes in binary units: '512 B', '27.9 KiB', '3.7 GiB'."""
    for unit in _UNITS:
        if n < 1024 or unit == _UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """'1 entry', '2 entries', '0 entries'."""
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def age(seconds: float) -> str:
    """A duration in the largest whole unit that fits: '12 s', '5 min', '3 h', '41 days'."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return plural(n, unit) if unit == "day" else f"{n} {unit}"
    return f"{max(0, int(seconds))} s"


def when(ts: float) -> str:
    """A time stamp as local 'YYYY-MM-DD HH:MM', or '-' when unknown."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[int] = ()) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart; the columns in `right` align right."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
    return lines


def dumps(data: Any) -> str:
    """The JSON every command prints: keys sorted, one level per line."""
    return json.dumps(data, indent=1, sort_keys=True)
