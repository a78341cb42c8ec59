"""The cache: the key (key.py: what it covers, made in one place) and what goes into it beyond the IR
(recipe.py: jitflow's own build code; registrations.py and lowering_rules.py: TVM registrations, with
held_values.py and code_identity.py naming the callables registered),
entry folders (entry.py), the disk cache (disk.py), the one way to open a cache and the location
rules (location.py), the one door for entries coming from or going elsewhere (door.py), bundles of
entries (bundle.py: pack, bundle_unpack.py: unpack, bundle_signature.py: who packed one), the check
before a rollout (rollout.py), entries loaded by label without a key (named_entry.py), the sources
of failed builds (failed.py), upkeep (admin.py) and the shared tier behind it (shared/).

`jitflow.cache.pack(out, keys=..., manifest=..., cache_dir=...)` and
`jitflow.cache.unpack(path, cache_dir=...)` are the bundles' Python API; they are imported on first
use, so that a cache hit imports neither.
"""
from __future__ import annotations

from typing import Any

_LAZY = {"pack": "bundle", "PackResult": "bundle", "unpack": "bundle_unpack", "UnpackResult": "bundle_unpack"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
