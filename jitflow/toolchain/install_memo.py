"""Facts about the installed software that every fresh process would otherwise work out again for its
cache key (the recipe's digest, TVM's op names, the version of a zig without package metadata), kept
across processes the way Python keeps bytecode.

A memo is a small JSON file in jitflow's own `__pycache__` folder (or under sys.pycache_prefix),
written atomically (a temporary file, then a rename) and not written where bytecode is not
(PYTHONDONTWRITEBYTECODE, a read-only install): whoever can change it can change jitflow's code.
Each memo holds, beside the fact, what the fact was taken from; its reader checks that against this
process before using it, so a memo that is stale, damaged or missing costs the work it saves, never a
wrong key. Nothing here raises.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

#: a memo larger than this is not read (they are a few kilobytes)
MAX_BYTES = 1 << 20


@lru_cache(maxsize=1)
def folder() -> Path:
    """Where the memos live: the __pycache__ folder Python uses for this package's modules."""
    return Path(importlib.util.cache_from_source(__file__)).parent


def _path(name: str) -> Path:
    return folder() / f"jitflow-{name}.json"


def read(name: str) -> Any:
    """The value stored under `name`, or None (missing, unreadable, too large or not JSON)."""
    try:
        fd = os.open(_path(name), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def write(name: str, value: Any) -> None:
    """Store `value` (JSON-able) under `name`, replacing what was there; nothing is written where
    bytecode is not, and a folder that cannot be written is left alone."""
    if sys.dont_write_bytecode:
        return
    target = _path(name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(value, out, separators=(",", ":"))
        os.replace(tmp, target)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
