"""The artifacts handed to MetaSchedule: a copy of each library in a folder of its own.

MetaSchedule's RemoveBuildArtifact deletes the folder of every artifact once it is measured, so the
cache's own files are never handed out: each artifact is a fresh temporary folder holding `lib.so`,
the verified bytes of the cache entry (a TVM library that tvm.runtime.load_module dlopens: nothing
is compiled or linked when a runner loads it).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..cache.store import location

#: prefix of the artifacts' folders (under the system's temporary folder)
PREFIX = "jitflow-ms-"
LIBRARY = "lib.so"


def copy_of(exe: Any) -> Path:
    """A new folder holding a copy of `exe`'s library as lib.so: from the cache without counting a
    use (build_all counted the build or the hit), else exported (caching off: built again)."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    dest = folder / LIBRARY
    key = exe.cache_key
    for cache in location.open_cache(exe.settings).search():
        found = cache.lookup(key.digest, key.inputs)
        if found is None:
            continue
        library = found[0]
        try:
            with open(dest, "wb") as out:
                library.copy_to(out)
        finally:
            library.close()
        os.chmod(dest, 0o755)
        return dest
    exe.export_library(dest)
    return dest
