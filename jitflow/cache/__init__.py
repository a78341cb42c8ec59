"""The cache, in rooms by job: the key and what goes into it (key/), the store on disk: entries,
locks, upkeep, counters, the location rules (store/), the bytes an entry travels as between machines
(wire/), bundles, the record and the rollout check (deploy/), and the shared tier (shared/). Here,
where the store's users find them: the one door for entries coming from elsewhere or leaving
(door.py: admit and install_bytes in, outgoing and entry_bytes out), a read-only cache's miss
(readonly.py, miss.py) and entries loaded by label without a key (named_entry.py).

`jitflow.cache.pack(out, keys=..., manifest=..., cache_dir=...)` and
`jitflow.cache.unpack(path, cache_dir=...)` are the bundles' Python API; they are imported on first
use, so that a cache hit imports neither.
"""
from __future__ import annotations

from typing import Any

_LAZY = {"pack": "deploy.bundle", "PackResult": "deploy.bundle", "unpack": "deploy.bundle_unpack",
         "UnpackResult": "deploy.bundle_unpack"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
