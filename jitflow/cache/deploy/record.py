"""The record of what a process obtained (JITFLOW_RECORD, record=): one JSON line for each library a
process got from the cache or built into it, through jit(), build(), export_library(), build_all or
the MetaSchedule builder, so that `jitflow cache pack --manifest RECORD` packs exactly what a
workload uses.

A line is a JSON object with the fields of FIELDS:

    {"key": "<64 hex>", "label": "main", "origin": "/app/serve.py:12", "target": "c",
     "host": "x86_64-linux-gnu", "outcome": "hit", "cache": "/home/me/.cache/jitflow",
     "time": "2026-12-02T07:00:00.123Z", "jitflow": "0.5.0"}

`label` is the module as this process named it (compile(name=), the command line's FILE.py:NAME),
else as `jitflow cache ls` shows the entry; `origin` where this process compiled it (FILE:LINE; null
where unknown, as for the command line's modules), else where the entry was; `target` the entry's
target as `cache ls` shows it; `outcome` is one of OUTCOMES (BuildInfo.outcome's names); `cache` the
cache folder the entry is in; `time` UTC.
A hit of a key this process has already recorded in that file is not written again. Builds that
are not cached (caching off, a module that cannot be cached) have no entry to pack: they are not
recorded, and one warning says so.

Many processes may append to one file at once: each line goes out in one write() to a file opened
with O_APPEND, which a local file system appends whole, never interleaved with another writer's
line. The file is created 0600 when missing; a symbolic link, a FIFO, a device or a folder at its
name is refused and never written through (O_NOFOLLOW, O_NONBLOCK, and the opened file must be a
regular file), and so is a file this user does not own, one that group or others may write, and a
second name (hard link) of a file: whoever else could write it would decide what is packed. A line that cannot be written is a RecordError naming the file and why: the
caller's call fails rather than leave a hole in the record (the library itself stays cached).
"""
from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...errors import RecordError
from ...files.folder_trust import writable_by_others
from ..store.entry import label, target_of, target_text

FIELDS = ("key", "label", "origin", "target", "host", "outcome", "cache", "time", "jitflow")
#: how a library was obtained: from the disk cache, built here, from the shared tier, or a library
#: this process had loaded already (BuildInfo.outcome)
OUTCOMES = ("hit", "built", "shared", "memory")
#: outcomes written once per process and file (a service's every hit would otherwise be a line)
_ONCE = ("hit", "memory")
_MAX_LABEL = 256
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_written: set[tuple[str, str]] = set()     # (record file, key) this process has written
_lock = threading.Lock()


def line(key: str, meta: dict[str, Any], outcome: str, cache_dir: Path | str, now: float | None = None,
         asked: str | None = None, origin: str | None = None) -> bytes:
    """The record's line for `key` (its entry's metadata `meta`), newline included; `asked` and
    `origin`: the label this process gave the module and where it compiled it, over the entry's."""
    target = target_of(meta) or {}
    functions = meta.get("functions") if isinstance(meta.get("functions"), list) else []
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    text = asked or label(name, [str(f) for f in functions])
    origin = origin or (meta.get("origin") if isinstance(meta.get("origin"), str) else None)
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    record = {"key": key, "label": _shortened(text), "origin": _shortened(origin) if origin else None,
              "target": target_text(target, host=False), "host": target.get("host"), "outcome": outcome,
              "cache": str(cache_dir), "time": stamp, "jitflow": __version__}
    return (json.dumps(record, sort_keys=False, ensure_ascii=True) + "\n").encode()


def _shortened(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[:_MAX_LABEL - 3] + "..."


def append(path: Path, data: bytes) -> None:
    """Append `data` (one line) to the record at `path` in one write; RecordError when it cannot be."""
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError as exc:
        raise RecordError(_problem(path, exc)) from None
    try:
        problem = _not_own(os.fstat(fd))
        if problem:
            raise RecordError(f"cannot write the record {path}: {problem}")
        try:
            written = os.write(fd, data)
        except OSError as exc:
            raise RecordError(_problem(path, exc)) from None
        if written != len(data):
            raise RecordError(f"cannot write the record {path}: only {written} of {len(data)} bytes were "
                              "written (is the disk full?)")
    finally:
        os.close(fd)


def _not_own(st: os.stat_result) -> str | None:
    """Why the opened file is not a record this user alone decides (another user could write lines
    that `pack --manifest` then packs), with the fix; None when it is."""
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file; give JITFLOW_RECORD (or record=) the path of a file"
    if st.st_uid != os.getuid():
        return (f"it belongs to another user (uid {st.st_uid}), who would decide what it says; give "
                "JITFLOW_RECORD (or record=) a file of your own, in a folder of your own")
    if writable_by_others(st, st.st_uid):
        return (f"group or others may write it (mode {stat.S_IMODE(st.st_mode):o}), and so add keys to it; "
                "make it private (chmod go-w) or give JITFLOW_RECORD (or record=) a new file")
    if st.st_nlink != 1:
        return (f"it has {st.st_nlink} names (a hard link: the lines would go to a file known by another name "
                "too); give JITFLOW_RECORD (or record=) a file of its own")
    return None


def _problem(path: Path, exc: OSError) -> str:
    why = {errno.ELOOP: "it is a symbolic link (refused: write the record to a file of its own)",
           errno.ENXIO: "it is a FIFO or a device, not a regular file",
           errno.EISDIR: "it is a folder", errno.ENOENT: "its folder does not exist",
           errno.EACCES: "permission denied (where it is another user's file in a shared folder such as /tmp, "
                         "the system refuses it too: fs.protected_regular); give a file of your own",
           errno.ENOSPC: "no space left on the device"}.get(exc.errno or 0, exc.strerror or str(exc))
    return f"cannot write the record {path}: {why}; fix it, or unset JITFLOW_RECORD"


def obtained(path: Path | None, key: str, meta: dict[str, Any], outcome: str, cache_dir: Path | str,
             asked: str | None = None, origin: str | None = None) -> None:
    """Record that this process obtained `key` (`outcome`) from the cache at `cache_dir`, when
    recording is on (`path`, the settings' record); `asked`, `origin`: as for line()."""
    if path is None:
        return
    mark = (str(path), key)
    with _lock:
        if outcome in _ONCE and mark in _written:
            return
        append(path, line(key, meta, outcome, cache_dir, asked=asked, origin=origin))
        _written.add(mark)


def not_cached(path: Path | None, key: str, why: str) -> None:
    """Say once that a build which is not cached is not in the record (there is no entry to pack)."""
    if path is None:
        return
    from ...logs import warn_once

    warn_once(f"record uncached {key}", "jitflow: %s is not recorded in %s: %s, so there is no cache entry to "
              "pack", key[:12], path, why)
