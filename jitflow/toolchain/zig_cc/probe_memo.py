"""The commands zig_direct.py asks zig for, kept in zig's cache folder: a new process reuses them
instead of asking again (four zig processes, some 100 ms of a first build in a fresh process).

A memo's name is a sha256 of what the command depends on: the zig binary (its path, size and
time, and the wheel's version), what it was asked for (compile or link) and the flags, include
folders and link inputs of the request. It lives in zig's cache folder (private to the user, like
the precompiled headers beside it), written whole under a temporary name and renamed, and it
records the request it answers.

A memo is run as the user on every build, so it is read back as untrusted input
(files/kept_file.py: a regular file of this user in folders of this user that no one else can
write, opened without following links or blocking, at most MAX_BYTES) and its contents are checked
(zig_command_check.py: this zig, the tool of the request, and words of the shapes zig prints, with
paths only in zig's installation, its cache and the include folders asked for). A memo that is
missing, refused, damaged, of another shape or of another request is asked for again and
replaced; a direct command that fails where zig cc succeeds has its memo forgotten (zig.py), so a
wrong memo costs time once, never a library.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Sequence

from ...files import kept_file
from . import zig_command_check
from .zig_direct import Probe

log = logging.getLogger("jitflow")

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


def problem(probe: Probe, zig_cache: Path, zig: str, parts: Sequence[str]) -> str | None:
    """Why `probe` is not a command to keep for the request `parts` ("compile" or "link", then its
    words), or None."""
    asked = [p for p in parts[1:] if p != "<object>"]
    return zig_command_check.problem(probe, zig, parts[0], asked, str(zig_cache))


def read(zig_cache: Path, memo: str, zig: str, parts: Sequence[str]) -> Probe | None:
    """The probe kept under `memo` for the request `parts`, or None (none, refused, not a probe of
    `zig` for that request, or not a command jitflow would have kept)."""
    path = _path(zig_cache, memo)
    value = kept_file.read_json(path, MAX_BYTES, root=Path(zig_cache))
    if not isinstance(value, dict) or value.get("asked") != list(parts):
        return None
    folder, command, frontend = value.get("folder"), value.get("command"), value.get("frontend", [])
    if not isinstance(folder, str) or not folder or not _words(command) or not isinstance(frontend, list) \
            or (frontend and not _words(frontend)):
        return None
    probe = Probe(folder, tuple(command), tuple(frontend))
    why = problem(probe, zig_cache, zig, parts)
    if why is not None:
        log.warning("jitflow: not running the command remembered in %s (%s); asking zig again", path, why)
        return None
    return probe


def _words(value: object) -> bool:
    return isinstance(value, list) and len(value) > 1 and all(isinstance(w, str) for w in value)


def write(zig_cache: Path, memo: str, probe: Probe, zig: str, parts: Sequence[str]) -> None:
    """Keep `probe`, zig's answer to the request `parts`, under `memo` (a folder that cannot be
    written is left alone; an answer that a later read would refuse is not kept)."""
    path = _path(zig_cache, memo)
    why = problem(probe, zig_cache, zig, parts)
    if why is not None:
        log.debug("jitflow: zig's command for %s is not kept (%s)", parts[0], why)
        kept_file.discard(path)          # nor what was there: the next process asks zig too
        return
    if kept_file.private_folder(path.parent):
        text = json.dumps({"asked": list(parts), "folder": probe.folder, "command": list(probe.command),
                           "frontend": list(probe.frontend)})
        kept_file.write_bytes(path, text.encode())


def forget(zig_cache: Path, memo: str) -> None:
    """Drop the memo (its command failed where zig cc did not): the next process asks zig again."""
    kept_file.discard(_path(zig_cache, memo))
