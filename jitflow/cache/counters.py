"""How a cache was used, kept across processes: hits, misses, shared-tier hits, builds, the time
builds took and the time hits saved (`jitflow cache stats`, like `ccache -s`); and what its entries
weigh, as far as the processes that published and pruned them know (`entries_bytes`: None when
unknown), so that a build checks the size cap without walking every entry (admin.after_publish).

The totals are one small JSON file in the cache's version folder, always RECORD bytes long (padded
with spaces). A process adds to them under an exclusive flock of the file (released by the OS if
the process dies): it reads the record, adds, and writes the whole record back with one pwrite at
offset 0. Readers take a shared flock, so they never see a write in progress, and a writer killed
at any point has written its whole record or nothing. No rename: on ext4, renaming over a file
flushes its data, milliseconds that every cache hit would pay. The file never grows; counting never
fails a build.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

FILE = "stats.json"
#: the file's size: the JSON, padded with spaces
RECORD = 512
#: whole counts, then seconds
COUNTS = ("hits", "misses", "shared_hits", "builds")
SECONDS = ("build_seconds", "saved_seconds")
#: build stages that are waiting, not building (left out of a build's time)
_NOT_BUILDING = ("wait", "shared tier")


def _zeros() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTS, 0), **dict.fromkeys(SECONDS, 0.0), "since": None, "entries_bytes": None}


def _parse(data: bytes) -> dict[str, Any]:
    totals = _zeros()
    try:
        found = json.loads(data.decode())
    except ValueError:
        return totals
    if isinstance(found, dict):
        for name in (*COUNTS, *SECONDS):
            value = found.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                totals[name] = type(totals[name])(value)
        if isinstance(found.get("since"), (int, float)) and not isinstance(found.get("since"), bool):
            totals["since"] = float(found["since"])
        size = found.get("entries_bytes")
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            totals["entries_bytes"] = size
    return totals


def read(root: Path) -> dict[str, Any]:
    """The totals of the cache whose version folder is `root` (zeros where nothing was counted)."""
    try:
        fd = os.open(Path(root) / FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return _zeros()
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _parse(os.pread(fd, RECORD, 0))
    finally:
        os.close(fd)


def _locked(root: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    fd = os.open(Path(root) / FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = json.dumps(change(_parse(os.pread(fd, RECORD, 0))), sort_keys=True).encode()
        if len(data) > RECORD:
            return          # numbers too large to count further: leave the totals as they are
        os.pwrite(fd, data.ljust(RECORD), 0)
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
        _locked(root, change)
    except OSError:
        pass


def zero(root: Path) -> None:
    """Set every total back to zero, from now (`cache stats --zero`); the entries' size is left."""
    _locked(root, lambda totals: dict(_zeros(), since=time.time(), entries_bytes=totals["entries_bytes"]))


def grow(root: Path, added: int) -> int | None:
    """Add a published entry's bytes to the entries' size; the new size, or None when it is unknown."""
    grown: list[int | None] = []

    def change(totals: dict[str, Any]) -> dict[str, Any]:
        if totals["entries_bytes"] is not None:
            totals["entries_bytes"] += added
        grown.append(totals["entries_bytes"])
        return totals

    try:
        _locked(root, change)
    except OSError:
        return None
    return grown[0] if grown else None


def set_size(root: Path, size: int | None) -> None:
    """Record the entries' size as counted by a walk of the cache (None: unknown)."""
    def change(totals: dict[str, Any]) -> dict[str, Any]:
        totals["entries_bytes"] = size
        return totals

    try:
        _locked(root, change)
    except OSError:
        pass


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
