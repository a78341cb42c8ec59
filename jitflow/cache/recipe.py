"""The build recipe: a sha256 of jitflow's own code and data that shape a library's bytes.

Flags, preludes, the C fix-ups, the CUDA header shim, the packing of the blob and the key itself
live in jitflow's sources, and an edit to any of them must not be served libraries built before
it (as Triton hashes its own sources into its cache keys). The digest covers every file under the
folders below (so files added there later are covered too) and the listed cache modules, skipping
only compiled Python. It is computed once per process.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
#: folders of jitflow whose every file shapes what is built
FOLDERS = ("builder", "toolchain", "formats", "target")
#: single files that decide what an entry holds and what its key covers
FILES = ("cache/key.py", "cache/entry.py", "cache/recipe.py", "cache/registrations.py")


def _files() -> list[str]:
    found = [os.path.join(PACKAGE, f) for f in FILES]
    for folder in FOLDERS:
        for root, dirs, names in os.walk(os.path.join(PACKAGE, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            found.extend(os.path.join(root, n) for n in names if not n.endswith((".pyc", ".pyo")))
    return sorted(found)


@lru_cache(maxsize=1)
def digest() -> str:
    """sha256 (hex) over the relative path and the bytes of every recipe file."""
    h = hashlib.sha256()
    for path in _files():
        with open(path, "rb") as f:
            data = f.read()
        h.update(os.path.relpath(path, PACKAGE).encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
