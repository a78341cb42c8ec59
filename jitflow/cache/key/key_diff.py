"""Which of a key's inputs differ between two places: this process and a cache entry (a miss, the
rollout check), or a build farm's caller and its worker.

A key's inputs (key.py: format, target, options, versions, ir_sha256) are nested JSON; a difference
is named by its dotted path (`versions.zig`, `options.pass_context.config.tirx.noalias`) with the
value on each side, shortened: `versions.zig: here 0.17.1, in the cache 0.16.0`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: what a value missing on one side reads as
ABSENT = "(absent)"
_WIDTH = 80


@dataclass(frozen=True)
class Difference:
    """One input that differs: its dotted name and its value on each side (None: absent there)."""

    name: str
    here: Any
    there: Any

    def text(self, there: str = "in the cache") -> str:
        """'name: here X, <there> Y'."""
        return f"{self.name}: here {short(self.here)}, {there} {short(self.there)}"


def short(value: Any) -> str:
    """A value in a line of text: strings bare, others as JSON would show them; at most 80 characters."""
    if value is None:
        return ABSENT
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _WIDTH else text[:_WIDTH - 3] + "..."


def differences(here: Any, there: Any, path: str = "") -> list[Difference]:
    """Every leaf where `here` and `there` (two keys' inputs, as JSON reads them back) differ, in
    the order of their sorted names; a whole branch missing on one side is one difference."""
    if isinstance(here, dict) and isinstance(there, dict):
        out: list[Difference] = []
        for name in sorted(set(here) | set(there), key=str):
            out += differences(here.get(name), there.get(name), f"{path}.{name}" if path else str(name))
        return out
    if here == there:
        return []
    return [Difference(path or "inputs", here, there)]


def lines(here: Any, there: Any, where: str = "in the cache", limit: int = 6) -> list[str]:
    """differences() as lines of text ('name: here X, <where> Y'), the first `limit`, then how many more."""
    found = differences(here, there)
    shown = [d.text(where) for d in found[:limit]]
    if len(found) > limit:
        shown.append(f"and {len(found) - limit} more")
    return shown
