"""How a cache was used, kept across processes: hits, misses, shared-tier hits, builds, the time
builds took and the time hits saved (`jitflow cache stats`, like `ccache -s`); and what its entries
weigh, as far as the processes that published and pruned them know (`entries_bytes`: None when
unknown), so that a build checks the size cap without walking every entry (admin.after_publish).

The totals are one small JSON file in the cache's version folder, always RECORD bytes long (padded
with spaces). A process adds to them under an exclusive flock of the file (released by the OS if
the process dies): it reads the record, adds, and writes the whole record back with one pwrite at
offset 0. Readers take a shared flock, so they never see a write in progress, and a writer killed
at any point has written its whole record or nothing. No rename: on ext4, renaming over a file
flushes its data, milliseconds that every cache hit would pay. The file never grows.

Counting never fails a build, and nothing at the file's name is ever harmed or waited on: it is
opened without following a link and without blocking, and used only when it is a regular file of
one name (a link, a folder, a FIFO, a device or a second hard link is left alone, and nothing is
counted). A record that is not what this module writes (a number that is not finite, or negative,
or beyond 2**63; a field of another type; bytes that are not JSON) reads as zeros, and the next
count writes a sound record over it. Either way the process says so once, with the fix.
"""
from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ...errors import CacheError
from ...logs import warn_once

FILE = "stats.json"
#: the file's size: the JSON, padded with spaces
RECORD = 512
#: whole counts, then seconds
COUNTS = ("hits", "misses", "shared_hits", "builds")
SECONDS = ("build_seconds", "saved_seconds")
#: the largest count or byte size read back (a signed 64-bit integer), and number of seconds
MAX_COUNT = (1 << 63) - 1
MAX_SECONDS = 1e15
#: build stages that are waiting, not building (left out of a build's time)
_NOT_BUILDING = ("wait", "shared tier")
_LEFT_ALONE = "and it is left alone: nothing is counted"
_FIX = "remove it, or run `jitflow cache stats --zero` to start counting afresh"
_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}


class Damaged(ValueError):
    """The counter file holds something other than a record this module writes; the message says what."""


def _zeros() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTS, 0), **dict.fromkeys(SECONDS, 0.0), "since": None, "entries_bytes": None}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _seconds(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and 0 <= value <= MAX_SECONDS)


def parse(data: bytes) -> dict[str, Any]:
    """The totals a record holds (zeros for an empty one); Damaged when it is not a record of this
    module's (every field it has of the right type and range)."""
    text = data.rstrip(b" \n")
    if not text:
        return _zeros()                  # made, not yet written (a writer holds its lock)
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        raise Damaged("it is not JSON") from None
    if not isinstance(found, dict):
        raise Damaged("it is not a JSON object")
    totals = _zeros()
    for name, valid, what in [*((n, _count, "a whole number from 0 to 2**63") for n in COUNTS),
                              *((n, _seconds, "a finite number of seconds, 0 or more") for n in SECONDS)]:
        value = found.get(name, totals[name])
        if not valid(value):
            raise Damaged(f"{name} is {str(value)[:40]!r}, not {what}")
        totals[name] = type(totals[name])(value)
    since, size = found.get("since"), found.get("entries_bytes")
    if since is not None and not _seconds(since):
        raise Damaged(f"since is {str(since)[:40]!r}, not a time")
    if size is not None and not _count(size):
        raise Damaged(f"entries_bytes is {str(size)[:40]!r}, not a size in bytes")
    totals["since"] = None if since is None else float(since)
    totals["entries_bytes"] = size
    return totals


def _warn(path: Path, problem: str, then: str) -> None:
    warn_once(f"counters {path}", "jitflow: the cache's counter file %s %s: it reads as zeros, %s; %s",
              path, problem, then, _FIX)


def _open(path: Path, writing: bool) -> int | None:
    """The counter file open for reading (or read-write, made if missing), or None where there is
    nothing to read or what is at its name is not a regular file of one name (said once)."""
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_RDWR | os.O_CREAT if writing else os.O_RDONLY)
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            _warn(path, f"is not a regular file ({_kind(path)})", _LEFT_ALONE)
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        problem = f"is not a regular file ({_KINDS.get(stat.S_IFMT(st.st_mode), 'of another kind')})"
    elif st.st_nlink != 1:
        problem = f"is a file with {st.st_nlink} names (hard links), not one of its own"
    else:
        return fd
    os.close(fd)
    _warn(path, problem, _LEFT_ALONE)
    return None


def _kind(path: Path) -> str:
    try:
        return _KINDS.get(stat.S_IFMT(os.lstat(path).st_mode), "not a regular file")
    except OSError:
        return "cannot be looked at"


def _read_record(fd: int, path: Path) -> dict[str, Any]:
    try:
        return parse(os.pread(fd, RECORD, 0))
    except Damaged as exc:
        _warn(path, f"is damaged ({exc})", "and the next count writes a sound record over it")
        return _zeros()


def read(root: Path) -> dict[str, Any]:
    """The totals of the cache whose version folder is `root` (zeros where nothing was counted, or
    where the file is damaged: said once)."""
    path = Path(root) / FILE
    try:
        fd = _open(path, writing=False)
    except OSError:
        return _zeros()
    if fd is None:
        return _zeros()
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _read_record(fd, path)
    except OSError:
        return _zeros()
    finally:
        os.close(fd)


def _locked(root: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
    """Apply `change` to the totals under the file's lock; False where the file cannot be used."""
    path = Path(root) / FILE
    fd = _open(path, writing=True)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = json.dumps(change(_read_record(fd, path)), sort_keys=True, allow_nan=False).encode()
        if len(data) > RECORD:
            return True     # numbers too large to count further: leave the totals as they are
        os.pwrite(fd, data.ljust(RECORD), 0)
        return True
    finally:
        os.close(fd)       # releases the lock


def add(root: Path, **deltas: float) -> None:
    """Add to the totals (names from COUNTS and SECONDS); an error is ignored (counting is best effort)."""
    def change(totals: dict[str, Any]) -> dict[str, Any]:
        for name, n in deltas.items():
            if isinstance(n, (int, float)) and math.isfinite(n) and n >= 0:   # never a record that reads as damaged
                totals[name] += n
        totals["since"] = totals["since"] or time.time()
        return totals

    try:
        _locked(root, change)
    except (OSError, ValueError):
        pass


def zero(root: Path) -> None:
    """Set every total back to zero, from now (`cache stats --zero`); the entries' size is left. What
    is at the file's name and is not a regular file of one name (a link, a FIFO) is replaced by a
    fresh record, never written through; a folder there is a CacheError saying so."""
    path = Path(root) / FILE
    fresh = lambda totals: dict(_zeros(), since=time.time(), entries_bytes=totals["entries_bytes"])  # noqa: E731
    try:
        if _locked(root, fresh):
            return
        data = json.dumps(fresh(_zeros()), sort_keys=True).encode().ljust(RECORD)
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE}.", dir=root)
        try:
            os.write(fd, data)
            os.close(fd)
            os.replace(tmp, path)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        raise CacheError(f"cannot zero the counters at {path}: {exc.strerror or exc}"
                         + ("; it is a folder: remove it" if os.path.isdir(path) and not os.path.islink(path)
                            else "")) from None


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
    except (OSError, ValueError):
        return None
    return grown[0] if grown else None


def set_size(root: Path, size: int | None) -> None:
    """Record the entries' size as counted by a walk of the cache (None: unknown)."""
    def change(totals: dict[str, Any]) -> dict[str, Any]:
        totals["entries_bytes"] = size
        return totals

    try:
        _locked(root, change)
    except (OSError, ValueError):
        pass


def build_seconds(meta: dict[str, Any]) -> float:
    """How long the build of an entry took, from its recorded stages (waiting left out)."""
    stages = meta.get("stages")
    if not isinstance(stages, dict):
        return 0.0
    total = sum(float(v) for k, v in stages.items() if k not in _NOT_BUILDING and _seconds(v))
    return total if _seconds(total) else 0.0


def record(root: Path, outcome: str, seconds: float, meta: dict[str, Any]) -> None:
    """Count one obtained library: a hit, a build, or a shared-tier hit, taking `seconds`."""
    if outcome == "hit":
        add(root, hits=1, saved_seconds=max(0.0, build_seconds(meta) - seconds))
    elif outcome == "built":
        add(root, misses=1, builds=1, build_seconds=build_seconds(meta))
    elif outcome == "shared":
        add(root, misses=1, shared_hits=1, saved_seconds=max(0.0, build_seconds(meta) - seconds))
