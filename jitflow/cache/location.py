"""Which cache folder this process uses: the configured one if it can be written, else a private
per-user temporary one (with one warning)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import CacheError
from ..logs import warn_once
from .disk import Cache


def usable(cache: Cache) -> Cache:
    """The configured cache if it can be written; else a per-user temporary one, with one warning."""
    try:
        cache.ensure()
        return cache
    except CacheError as exc:
        fallback = Cache(Path(tempfile.gettempdir()) / f"jitflow-{os.getuid()}")
        try:
            fallback.ensure()
        except CacheError:
            raise exc from None
        warn_once("cache fallback", "jitflow: %s; using %s for this process instead", exc, fallback.root.parent)
        return fallback
