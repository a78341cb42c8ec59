"""Which cache folder this process uses: the configured one if it can be written, else a private
per-user temporary one (with one warning); and where zig's cache goes with it.

A configured folder that another user could change is never replaced silently: that is an
UntrustedFolderError to fix. A fallback folder, at a predictable name under the temporary folder,
is used only if it is ours and private; if another user created it first, this process uses a
fresh private folder of its own instead (and says so).
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from ..config import Settings
from ..errors import CacheError, UntrustedFolderError
from ..logs import warn_once
from . import trust
from .disk import Cache

_private: dict[str, Path] = {}   # per process: the folder used when the shared fallback is refused


def fallback_folder() -> Path:
    """<temporary folder>/jitflow-<uid>, created private; if it cannot be trusted (another user made
    it first), a new private folder for this process alone, removed when the process ends."""
    shared = Path(tempfile.gettempdir()) / f"jitflow-{os.getuid()}"
    try:
        return trust.make_private_folder(shared)
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


def zig_settings(settings: Settings, cache: Cache | None) -> Settings:
    """Settings whose zig cache can be written: zig's default cache (inside the configured cache
    folder) follows the folder this process really uses. With the disk cache off (`cache` None),
    an unwritable default moves to the fallback folder. An explicit JITFLOW_ZIG_CACHE_DIR stays."""
    default = settings.cache_dir / "zig"
    if settings.zig_cache_dir != default:
        return settings
    if cache is not None:
        target = cache.folder / "zig"
    else:
        try:
            default.mkdir(parents=True, exist_ok=True)
            if os.access(default, os.W_OK):
                return settings
        except OSError:
            pass
        target = fallback_folder() / "zig"
        warn_once("cache fallback", "jitflow: cannot write zig's cache under %s; using %s for this process instead",
                  settings.cache_dir, target)
    if target == settings.zig_cache_dir:
        return settings
    return dataclasses.replace(settings, zig_cache_dir=target)
