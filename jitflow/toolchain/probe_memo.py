"""The commands zig_direct.py asks zig for, kept in zig's cache folder: a new process reuses them
instead of asking again (four zig processes, some 100 ms of a first build in a fresh process).

A memo's name is a sha256 of what the command depends on: the zig binary (its path, size and
time, and the wheel's version), what it was asked for (compile or link) and the flags, include
folders and link inputs of the request. It lives in zig's cache folder (private to the user, like
the precompiled headers beside it), written whole under a temporary name and renamed. A memo that
is missing, damaged or of another shape is asked for again; a direct command that fails where zig
cc succeeds has its memo forgotten (zig.py), so a wrong memo costs time once, never a library.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

from .zig_direct import Probe

FOLDER = "jitflow-probes"
#: a memo is a few kilobytes; a larger file is not one
MAX_BYTES = 1 << 20


def name(zig: str, version: str, parts: Sequence[str]) -> str | None:
    """The memo's name for a probe of `zig` (its `version`) asked with `parts`; None if zig cannot be
    looked at."""
    try:
        st = os.stat(zig)
    except OSError:
        return None
    stamp = [zig, version, str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join([*stamp, *parts]).encode()).hexdigest()[:32]


def _path(zig_cache: Path, memo: str) -> Path:
    return Path(zig_cache) / FOLDER / f"{memo}.json"


def read(zig_cache: Path, memo: str, zig: str) -> Probe | None:
    """The probe kept under `memo` (None if there is none, or not a probe of `zig`)."""
    try:
        with open(_path(zig_cache, memo), "rb") as f:
            data = f.read(MAX_BYTES + 1)
        value = json.loads(data) if len(data) <= MAX_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    folder, command, frontend = value.get("folder"), value.get("command"), value.get("frontend", [])
    if not isinstance(folder, str) or not folder or not _words(command) or not isinstance(frontend, list) \
            or (frontend and not _words(frontend)) or command[0] != zig:
        return None
    return Probe(folder, tuple(command), tuple(frontend))


def _words(value: object) -> bool:
    return isinstance(value, list) and len(value) > 1 and all(isinstance(w, str) for w in value)


def write(zig_cache: Path, memo: str, probe: Probe) -> None:
    """Keep `probe` under `memo` (a folder that cannot be written is left alone)."""
    path = _path(zig_cache, memo)
    text = json.dumps({"folder": probe.folder, "command": list(probe.command), "frontend": list(probe.frontend)})
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        except OSError:
            os.unlink(tmp)
    except OSError:
        pass


def forget(zig_cache: Path, memo: str) -> None:
    """Drop the memo (its command failed where zig cc did not): the next process asks zig again."""
    try:
        _path(zig_cache, memo).unlink()
    except OSError:
        pass
