"""How commands print: time stamps and JSON; sizes, ages, plurals and columns come from text_format
(the toolkit inspect and trace print with too)."""
from __future__ import annotations

import json
import time
from typing import Any

from ..text.format import age, plural, table
from ..text.format import byte_size as human_size

__all__ = ["age", "dumps", "human_size", "plural", "table", "when"]


def when(ts: float) -> str:
    """A time stamp as local 'YYYY-MM-DD HH:MM', '-' when unknown, '?' when no date can show it."""
    if not ts:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return "?"


def dumps(data: Any) -> str:
    """The JSON every command prints: keys sorted, one level per line."""
    return json.dumps(data, indent=1, sort_keys=True)
