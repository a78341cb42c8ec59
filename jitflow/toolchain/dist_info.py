"""Installed package versions, read from their dist-info folders rather than importlib.metadata, which
walks every sys.path entry: on machines with large environments that costs tens of milliseconds
per lookup, which a cache hit cannot afford. Here a lookup is one listing of the folder (kept for
the process) and a comparison of the names in it.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@lru_cache(maxsize=None)
def _listing(folder: str) -> tuple[str, ...]:
    try:
        return tuple(os.listdir(folder))
    except OSError:
        return ()


def version(dist: str, site_dirs: Iterable[str | os.PathLike]) -> str | None:
    """Version of distribution `dist` from a *.dist-info folder in site_dirs, else importlib.metadata."""
    wanted = _normalized(dist)
    for folder in site_dirs:
        for entry in _listing(os.fspath(folder)):
            if not entry.endswith(".dist-info"):
                continue
            name, sep, found = entry[:-len(".dist-info")].partition("-")
            # normalizing keeps a name's first character but its case: most entries stop there
            if sep and name[:1].lower() == wanted[:1] and _normalized(name) == wanted:
                return found
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def site_of(package_dir: str | os.PathLike) -> str:
    """The site-packages folder that holds an imported package's folder."""
    return str(Path(package_dir).parent)
