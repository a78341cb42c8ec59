"""A read-only cache's miss (JITFLOW_CACHE=readonly, cache="readonly"): nothing is built and nothing is
written under the cache folder, so a key the folder does not hold is either the shared tier's entry,
held in a private temporary folder outside the cache folder for as long as the caller holds its
library (TransientCache), or a CacheMissError that names the key, the module and target, why (its
kind) and the fix that fits why (miss.py).
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import CacheError, CacheMissError, RemoteEntryError
from ..options import BuildOptions
from ..runtime.library_file import LibraryFile
from ..targets import TargetSpec
from . import door
from .store.disk import Cache
from .store.entry import label, target_text
from .key.key import CacheKey

log = logging.getLogger("jitflow")


def miss(cache: Cache, cache_key: CacheKey, mod: Any, spec: TargetSpec, settings: Settings,
         options: BuildOptions) -> CacheMissError:
    """The error for a key the read-only `cache` cannot serve: its kind and the fix that fits it
    (miss.py), after the lookup's refusal, if any."""
    from .miss import miss_error

    names = sorted(str(gvar.name_hint) for gvar in mod.functions)
    target = {"kind": spec.kind, "archs": list(spec.archs)}
    if spec.is_cuda:
        target["cuda_compiler"] = settings.cuda_compiler
    return miss_error(cache, cache_key, label(options.label, names), options.label is not None,
                      target_text(target, host=False) + f" for {spec.host}", options.origin)


class TransientCache:
    """Where a shared-tier entry fetched in read-only mode lives: a private temporary folder, removed
    when its library is released (the read-only cache folder is never written)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="jitflow-readonly-"))
        self.cache = Cache(self.folder)

    def release(self, library: LibraryFile) -> None:
        library.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<TransientCache {self.folder}>"


def from_shared(settings: Settings, cache_key: CacheKey) -> tuple[tuple[LibraryFile, dict[str, Any]],
                                                                      TransientCache] | None:
    """The shared tier's verified entry for the key, in a TransientCache; None when there is none (or
    no tier, or the entry is refused: said once as the tier says it). No lock is taken, nothing is
    sent to the tier, and nothing is counted on disk."""
    if not settings.remote.url:
        return None
    from .shared.tier import read_entry

    got = read_entry(settings.remote, cache_key.digest)
    if got is None:
        return None
    blob, secret = got
    holder = TransientCache()
    try:
        holder.cache.ensure()
        found = door.install_bytes(holder.cache, cache_key.digest, blob, secret=secret, expect=cache_key.inputs).found
    except (CacheError, RemoteEntryError, OSError) as exc:  # the signature, a sha256 or the local checks failed
        log.warning("jitflow: refused shared entry %s: %s", cache_key.digest[:12], exc)
        found = None
    if found is None:
        shutil.rmtree(holder.folder, ignore_errors=True)
        return None
    return found, holder
