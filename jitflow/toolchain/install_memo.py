"""Facts about the installed software that every fresh process would otherwise work out again for its
cache key (the recipe's digest, TVM's op names, the version of a zig without package metadata), kept
across processes the way Python keeps bytecode.

A memo is a small JSON file in jitflow's own `__pycache__` folder (or under sys.pycache_prefix),
written atomically (a temporary file, then a rename) and not written where bytecode is not
(PYTHONDONTWRITEBYTECODE, a read-only install): whoever can change it can change jitflow's code.
Each memo holds, beside the fact, what the fact was taken from; its reader checks that against this
process before using it, so a memo that is stale, damaged or missing costs the work it saves, never a
wrong key. A memo is read back as untrusted input (files/kept_file.py): a regular file, not a link
or a FIFO, owned by this user, root or the package's owner, in a folder no one else can write,
opened without blocking, at most MAX_BYTES. Nothing here raises.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..files import kept_file

#: a memo larger than this is not read (they are a few kilobytes)
MAX_BYTES = 1 << 20


@lru_cache(maxsize=1)
def folder() -> Path:
    """Where the memos live: the __pycache__ folder Python uses for this package's modules."""
    return Path(importlib.util.cache_from_source(__file__)).parent


def _path(name: str) -> Path:
    return folder() / f"jitflow-{name}.json"


def _owners() -> frozenset[int]:
    """Who may have written a memo this process reads: this user, root, and whoever owns this package
    (and so could change its code anyway)."""
    owners = {os.getuid(), 0}
    try:
        owners.add(os.stat(Path(__file__).parent).st_uid)
    except OSError:
        pass
    return frozenset(owners)


def read(name: str) -> Any:
    """The value stored under `name`, or None (missing, refused by files/kept_file.py's rules with
    the package's owners, too large or not JSON): the reader checks the value's shape and source."""
    return kept_file.read_json(_path(name), MAX_BYTES, owners=_owners())


def write(name: str, value: Any) -> None:
    """Store `value` (JSON-able) under `name`, replacing what was there (kept_file.write_bytes: whole,
    through a rename, never through a link); nothing is written where bytecode is not, and a folder
    that cannot be written is left alone."""
    if sys.dont_write_bytecode:
        return
    try:
        data = json.dumps(value, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return
    target = _path(name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    kept_file.write_bytes(target, data)
