"""A build farm worker's side of one request: rebuild the Executable, recompute its key, refuse a
key other than the caller's, build (or find) the library in this worker's own cache, and hand the
entry back as the bytes the cache's door hands out for it (door.entry_bytes: checked as a lookup
checks, every file with its sha256).

One build at a time per worker: the Executable's settings say one compiler (build_jobs=1, set where
the request is read: request.executable), and the build forks nothing; the process's environment is
left as it was. Every error comes back as data with its item; only the worker dying ends a task.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from ..errors import KeyMismatchError

#: largest entry handed back (a library with every source; CUDA fatbins for many archs are MBs)
MAX_ENTRY_BYTES = 1 << 30


def run(wire: dict[str, Any], *weights: bytes) -> dict[str, Any]:
    """Build one request (request.py); returns plain data: ok, outcome, the entry's bytes or
    in_place, or the error and its type (refused: the key differed)."""
    from ..cache import door
    from ..cache.key import key_diff
    from ..cache.store.entry import as_json

    start = time.perf_counter()
    reply: dict[str, Any] = {"ok": False, "node": socket.gethostname(), "refused": False}
    try:
        from .request import executable

        exe = executable(wire, list(weights))
        mine = exe.cache_key
        if mine.digest != wire["key"]:
            diff = key_diff.lines(as_json(mine.inputs), as_json(wire["inputs"]), "in the caller")
            raise KeyMismatchError(wire["key"], mine.digest, diff)
        info = exe.build(wire.get("timeout_s"))
        folder = Path(info.library).parent            # root/entries/<shard>/<key>/lib.so
        origin = wire["origin"]
        reply.update(ok=True, outcome=info.outcome,
                     in_place=origin["host"] == reply["node"] and str(folder.parents[2]) == origin["cache"])
        if not reply["in_place"]:
            reply["entry"] = door.entry_bytes(folder, wire["key"], max_bytes=MAX_ENTRY_BYTES)
    except Exception as exc:  # noqa: BLE001 - every error goes back with its item
        reply.update(ok=False, error=str(exc), error_type=type(exc).__name__,
                     refused=isinstance(exc, KeyMismatchError))
    reply["seconds"] = time.perf_counter() - start
    return reply
