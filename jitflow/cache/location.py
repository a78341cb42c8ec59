"""Which cache folder this process uses: the configured one if it can be written, else a private
per-user temporary one (with one warning). (zig's cache is not in it: see toolchain/zig_cache.py.)

A configured folder that another user could change is never replaced silently: that is an
UntrustedFolderError to fix. A fallback folder, at a predictable name under the temporary folder,
is used only if it is ours and private; if another user created it first, this process uses a
fresh private folder of its own instead (and says so).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from .. import folder_trust
from ..errors import CacheError, UntrustedFolderError
from ..logs import warn_once
from .disk import Cache

_private: dict[str, Path] = {}   # per process: the folder used when the shared fallback is refused


def fallback_folder() -> Path:
    """<temporary folder>/jitflow-<uid>, created private; if it cannot be trusted (another user made
    it first), a new private folder for this process alone, removed when the process ends."""
    shared = Path(tempfile.gettempdir()) / f"jitflow-{os.getuid()}"
    try:
        return folder_trust.make_private_folder(shared)
    except UntrustedFolderError as exc:
        if "own" not in _private:
            folder = Path(tempfile.mkdtemp(prefix=f"jitflow-{os.getuid()}-"))
            atexit.register(shutil.rmtree, folder, True)
            _private["own"] = folder
            warn_once("fallback refused", "jitflow: %s; using the private folder %s for this process", exc, folder)
        return _private["own"]


def usable(cache: Cache) -> Cache:
    """The configured cache if it can be written; else a per-user temporary one, with one warning.

    An untrusted configured folder raises UntrustedFolderError (it is not a fallback case).
    """
    try:
        cache.ensure()
        return cache
    except UntrustedFolderError:
        raise
    except CacheError as exc:
        try:
            fallback = Cache(fallback_folder())
            fallback.ensure()
        except (CacheError, OSError):
            raise exc from None
        warn_once("cache fallback", "jitflow: %s; using %s for this process instead", exc, fallback.folder)
        return fallback
