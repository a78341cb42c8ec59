"""How a cache was used, kept across processes: hits, misses, shared-tier hits, builds, the time
builds took and the time hits saved (`jitflow cache stats`, like `ccache -s`).

The totals are one small JSON file in the cache's version folder. A process adds to them under an
exclusive flock of a lock file beside it (released by the OS if the process dies), writing a new
file and renaming it over the old one: a reader sees the old totals or the new, never half of a
file, and the file stays the same size however many processes count. Counting never fails a build.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

FILE = "stats.json"
LOCK = "stats.lock"
#: whole counts, then seconds
COUNTS = ("hits", "misses", "shared_hits", "builds")
SECONDS = ("build_seconds", "saved_seconds")
#: build stages that are waiting, not building (left out of a build's time)
_NOT_BUILDING = ("wait", "shared tier")


def read(root: Path) -> dict[str, Any]:
    """The totals of the cache whose version folder is `root` (zeros where nothing was counted)."""
    totals: dict[str, Any] = {**dict.fromkeys(COUNTS, 0), **dict.fromkeys(SECONDS, 0.0), "since": None}
    try:
        data = json.loads((Path(root) / FILE).read_text())
    except (OSError, ValueError):
        return totals
    if isinstance(data, dict):
        for name in (*COUNTS, *SECONDS):
            value = data.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                totals[name] = type(totals[name])(value)
        if isinstance(data.get("since"), (int, float)):
            totals["since"] = float(data["since"])
    return totals


def _write(root: Path, totals: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".stats-", dir=root)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(totals, out, sort_keys=True)
        os.replace(tmp, root / FILE)
    except BaseException:
        os.unlink(tmp)
        raise


def _locked(root: Path, change: Any) -> None:
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write(root, change(read(root)))
    finally:
        os.close(fd)       # releases the lock


def add(root: Path, **deltas: float) -> None:
    """Add to the totals (names from COUNTS and SECONDS); an error is ignored (counting is best effort)."""
    def change(totals: dict[str, Any]) -> dict[str, Any]:
        for name, n in deltas.items():
            totals[name] += n
        totals["since"] = totals["since"] or time.time()
        return totals

    try:
        _locked(Path(root), change)
    except OSError:
        pass


def zero(root: Path) -> None:
    """Set every total back to zero, from now (`cache stats --zero`)."""
    _locked(Path(root), lambda _totals: {**dict.fromkeys(COUNTS, 0), **dict.fromkeys(SECONDS, 0.0),
                                         "since": time.time()})


def build_seconds(meta: dict[str, Any]) -> float:
    """How long the build of an entry took, from its recorded stages (waiting left out)."""
    stages = meta.get("stages")
    if not isinstance(stages, dict):
        return 0.0
    return sum(float(v) for k, v in stages.items() if k not in _NOT_BUILDING and isinstance(v, (int, float)))


def record(root: Path, outcome: str, seconds: float, meta: dict[str, Any]) -> None:
    """Count one obtained library: a hit, a build, or a shared-tier hit, taking `seconds`."""
    if outcome == "hit":
        add(root, hits=1, saved_seconds=max(0.0, build_seconds(meta) - seconds))
    elif outcome == "built":
        add(root, misses=1, builds=1, build_seconds=build_seconds(meta))
    elif outcome == "shared":
        add(root, misses=1, shared_hits=1, saved_seconds=max(0.0, build_seconds(meta) - seconds))
