"""Look after a cache directory: list entries, enforce the size cap (least recently used first), clear.

Safe while other processes use the cache: an entry whose build lock is held, or that was
published moments ago, is left alone; an entry is removed by renaming it out of place first,
so a reader never sees half of one.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .disk import Cache
from .entry import Entry, discard, target_of, target_text

log = logging.getLogger("jitflow")
#: entries younger than this are never evicted: another process may be about to load them.
GRACE_SECONDS = 60.0
#: staging folders older than this belong to builds that died; they are removed.
STALE_STAGING_SECONDS = 3600.0


@dataclass
class EntryInfo:
    """One cache entry as `jitflow cache ls` shows it."""

    key: str
    path: Path
    size: int
    created: float
    last_used: float
    functions: list[str] = field(default_factory=list)
    target: str = "?"
    host: str = "?"
    readable: bool = True


def _folder_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def entries(cache: Cache) -> list[EntryInfo]:
    """Every entry folder of the cache with its size, times and what it holds."""
    found = []
    if not cache.entries.is_dir():
        return found
    for shard in sorted(cache.entries.iterdir()):
        if not shard.is_dir():
            continue
        for entry in sorted(shard.iterdir()):
            meta = Entry(entry).read_meta() if entry.is_dir() else None
            try:
                used = Entry(entry).used.stat().st_mtime
            except OSError:
                used = entry.stat().st_mtime if entry.exists() else 0.0
            created = float(meta.get("created", used)) if meta else used
            found.append(EntryInfo(
                key=entry.name, path=entry, size=_folder_size(entry), created=created, last_used=used,
                functions=list(meta.get("functions", [])) if meta else [],
                target=target_text(target_of(meta), host=False) if meta else "?",
                host=(target_of(meta) or {}).get("host") or "?" if meta else "?", readable=meta is not None))
    return found


def remove_entry(cache: Cache, key: str, grace: float = GRACE_SECONDS) -> bool:
    """Remove one entry unless it is being built or was just published; True if removed."""
    from filelock import Timeout

    entry = cache.entry_dir(key)
    try:
        with cache.lock(key, timeout=0):
            try:
                published = entry.stat().st_mtime
            except OSError:
                return False
            if grace and time.time() - published < grace:
                return False
            discard(entry, cache.staging_root)
        return True
    except Timeout:
        return False
    except OSError as exc:
        log.warning("jitflow: could not remove cache entry %s: %s", key[:12], exc)
        return False


def _stale_staging(cache: Cache, older_than: float) -> Iterator[Path]:
    if not cache.staging_root.is_dir():
        return
    now = time.time()
    for folder in cache.staging_root.iterdir():
        try:
            if now - folder.stat().st_mtime > older_than:
                yield folder
        except OSError:
            continue


def prune(cache: Cache, max_size: int | None = None, older_than: float | None = None,
          keep: str | None = None, grace: float = GRACE_SECONDS) -> list[EntryInfo]:
    """Evict entries unused for `older_than` seconds, then least recently used ones until the
    cache fits in `max_size` bytes. `keep` names a key never to evict (the one just built)."""
    for folder in _stale_staging(cache, STALE_STAGING_SECONDS):
        shutil.rmtree(folder, ignore_errors=True)
    listing = sorted(entries(cache), key=lambda e: e.last_used)
    removed: list[EntryInfo] = []
    now = time.time()
    total = sum(e.size for e in listing)
    for e in listing:
        if e.key == keep:
            continue
        too_old = older_than is not None and now - e.last_used > older_than
        too_big = max_size is not None and total > max_size
        if not (too_old or too_big):
            continue
        if remove_entry(cache, e.key, grace):
            removed.append(e)
            total -= e.size
    if removed:
        log.info("jitflow: evicted %d cache entries (%d bytes)", len(removed), sum(e.size for e in removed))
    return removed


def clear(cache: Cache) -> int:
    """Remove every entry (entries being built are skipped); returns how many were removed."""
    return sum(remove_entry(cache, e.key, grace=0) for e in entries(cache))


