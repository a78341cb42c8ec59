"""Look after a cache directory: list entries, enforce the size cap (least recently used first), clear.

Safe while other processes use the cache: an entry whose build lock is held, or that was
published moments ago, is left alone; an entry is removed by renaming it out of place first,
so a reader never sees half of one. prune and clear can report what they removed and what they
kept and why (a PruneReport), and prune can say what it would do without doing it (dry_run).
"""
from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import counters, staging
from .disk import Cache
from .entry import MAX_TIME, Entry, discard, target_of, target_text
from .key_lock import LockTimeout

log = logging.getLogger("jitflow")
#: entries younger than this are never evicted: another process may be about to load them.
GRACE_SECONDS = 60.0
#: staging folders that are not held (staging.py) and older than this belong to writers that died
STALE_STAGING_SECONDS = staging.STALE_SECONDS
_KEY = re.compile(r"[0-9a-f]{64}")


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
    kind: str = "?"
    archs: list[str] = field(default_factory=list)
    name: str | None = None        # compile(name=...) or the command line's FILE.py:NAME
    origin: str | None = None      # where the module was compiled (FILE:LINE), when known
    problem: str | None = None    # why its metadata cannot be used (it is refused, rebuilt when next used)
    cpu_level: str | None = None   # the host code's CPU level; None for the architecture's baseline
    options: list[str] = field(default_factory=list)   # the keyed options that are not the defaults

    def to_json(self) -> dict[str, Any]:
        """The entry as `jitflow cache ls --json` gives it (docs/cli.md); unknown fields are null."""
        known = self.readable
        return {"key": self.key, "path": str(self.path), "size": self.size, "created": self.created,
                "last_used": self.last_used, "functions": self.functions, "name": self.name, "origin": self.origin,
                "readable": known,
                "kind": self.kind if known else None, "archs": self.archs,
                "host": self.host if known and self.host != "?" else None, "target": self.target if known else None,
                "cpu_level": self.cpu_level, "options": self.options, "problem": self.problem}


#: Why prune removed an entry: unused for longer than older_than, or least recently used over the cap.
REMOVED_UNUSED, REMOVED_OVER_CAP, REMOVED_CLEAR = "unused", "over-cap", "clear"
#: Why an entry that should go was kept: published within the grace period, its build lock is held
#: (being built), it was gone already (another process removed it), or removing it failed.
KEPT_RECENT, KEPT_BUILDING, KEPT_GONE, KEPT_ERROR = "recent", "building", "gone", "error"


@dataclass
class PruneReport:
    """Entries prune or clear removed (or, in a dry run, would remove) and entries they kept, each with why."""

    removed: list[tuple[EntryInfo, str]] = field(default_factory=list)
    kept: list[tuple[EntryInfo, str]] = field(default_factory=list)


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (links counted as links); 0 where it cannot be read."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def entries(cache: Cache) -> list[EntryInfo]:
    """Every entry folder of the cache with its size, times and what it holds. An entry that cannot
    be described (metadata that fails its checks, or fails in a way no check foresaw) is listed as
    refused, with why, so that prune and clear still remove it; a folder whose name is not a key is
    no entry: it is skipped, with a warning naming it."""
    found: list[EntryInfo] = []
    if not cache.entries.is_dir():
        return found
    for shard in sorted(cache.entries.iterdir()):
        if not shard.is_dir():
            continue
        for entry in sorted(shard.iterdir()):
            if not _KEY.fullmatch(entry.name) or not entry.name.startswith(shard.name):
                log.warning("jitflow: skipped %s in the cache's entries: its name is not a cache key (not an entry)",
                            ascii(str(entry))[1:-1])
                continue
            try:
                found.append(_info(entry))
            except (OSError, ValueError, OverflowError, TypeError) as exc:
                found.append(EntryInfo(key=entry.name, path=entry, size=folder_size(entry), created=0.0,
                                       last_used=0.0, readable=False,
                                       problem=f"it cannot be listed ({type(exc).__name__}: {ascii(str(exc))[1:-1]})"))
    return found


def _info(entry: Path) -> EntryInfo:
    """One entry folder as `cache ls` shows it."""
    meta, problem = Entry(entry).meta_and_problem() if entry.is_dir() else (None, "not a folder")
    try:
        used = Entry(entry).used.stat().st_mtime
    except OSError:
        used = entry.stat().st_mtime if entry.exists() else 0.0
    used = used if 0 <= used <= MAX_TIME else 0.0        # a time set by hand beyond what a date can show
    created = float(meta.get("created", used)) if meta else used
    target = (target_of(meta) if meta else None) or {}
    options = _keyed_options(meta)
    level = _cpu_level(options)
    return EntryInfo(
        key=entry.name, path=entry, size=folder_size(entry), created=created, last_used=used,
        functions=list(meta.get("functions", [])) if meta else [],
        target=(target_text(target, host=False) + (f" {level}" if level else "")) if target else "?",
        cpu_level=level, options=option_words(options),
        host=target.get("host") or "?", readable=meta is not None,
        kind=target.get("kind") or "?", archs=list(target.get("archs") or []), problem=problem,
        name=meta.get("name") if meta and isinstance(meta.get("name"), str) else None,
        origin=meta.get("origin") if meta and isinstance(meta.get("origin"), str) else None)


def _keyed_options(meta: dict[str, Any] | None) -> dict[str, Any]:
    """The options an entry's key was taken over (its meta.json's key_inputs), {} where unknown."""
    options = ((meta or {}).get("key_inputs") or {}).get("options") if isinstance(meta, dict) else None
    return options if isinstance(options, dict) else {}


def _cpu_level(options: dict[str, Any]) -> str | None:
    level = options.get("cpu_level")
    name = level.get("name") if isinstance(level, dict) else None
    return name if isinstance(name, str) else None


def _short(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if not isinstance(value, str) else value


def option_words(options: dict[str, Any]) -> list[str]:
    """What sets an entry apart from a default build of its module, in words: the PassContext's
    config and opt level other than 3, passes disabled or required, device options, a Relax pipeline
    other than the default, the cache salt ("tirx.disable_vectorize=true", "opt_level=2")."""
    words: list[str] = []
    context = options.get("pass_context") if isinstance(options.get("pass_context"), dict) else {}
    config = context.get("config") if isinstance(context.get("config"), dict) else {}
    words += [f"{k}={_short(v)}" for k, v in sorted(config.items())]
    if context.get("opt_level", 3) != 3:
        words.append(f"opt_level={_short(context.get('opt_level'))}")
    for field_name in ("disabled", "required"):
        if context.get(field_name):
            words.append(f"{field_name}={_short(context[field_name])}")
    if options.get("device_options"):
        words.append("device_options=" + _short(options["device_options"]))
    pipeline = options.get("relax_pipeline")
    if isinstance(pipeline, str) and pipeline.split(" = ")[0] != "default":
        words.append(f"relax_pipeline={pipeline.split(' = ')[0]}")
    if options.get("salt") is not None:
        words.append(f"salt={_short(options['salt'])}")
    return words


def hold_reason(cache: Cache, key: str, grace: float = GRACE_SECONDS) -> str | None:
    """Why remove_entry would keep this entry now (KEPT_RECENT, KEPT_BUILDING, KEPT_GONE), or None."""
    try:
        published = cache.entry_dir(key).stat().st_mtime
    except OSError:
        return KEPT_GONE
    if grace and time.time() - published < grace:
        return KEPT_RECENT
    if cache.readonly:
        return None          # a dry run on a read-only cache: no lock file is made to find out
    try:
        with cache.lock(key, timeout=0):
            return None
    except LockTimeout:
        return KEPT_BUILDING
    except OSError:
        return KEPT_ERROR


def remove_entry(cache: Cache, key: str, grace: float = GRACE_SECONDS) -> bool:
    """Remove one entry unless it is being built or was just published; True if removed."""
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
    except LockTimeout:
        return False
    except OSError as exc:
        log.warning("jitflow: could not remove cache entry %s: %s", key[:12], exc)
        return False


def remove_abandoned_staging(cache: Cache) -> int:
    """Remove the staging folders whose writer is gone (a build or an unpack killed midway): held ones
    at once, others after STALE_STAGING_SECONDS (staging.py); never one a live process is using."""
    return staging.remove_abandoned(cache.staging_root, STALE_STAGING_SECONDS)


def prune(cache: Cache, max_size: int | None = None, older_than: float | None = None,
          keep: str | None = None, grace: float = GRACE_SECONDS, dry_run: bool = False,
          report: PruneReport | None = None) -> list[EntryInfo]:
    """Evict entries unused for `older_than` seconds, then least recently used ones until the
    cache fits in `max_size` bytes. `keep` names a key never to evict (the one just built).

    dry_run: remove nothing, return what would go. report: filled with what went and what was kept, and why.
    """
    if not dry_run:
        remove_abandoned_staging(cache)
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
        gone = hold_reason(cache, e.key, grace) is None if dry_run else remove_entry(cache, e.key, grace)
        if gone:
            removed.append(e)
            total -= e.size
        if report is not None:
            if gone:
                report.removed.append((e, REMOVED_UNUSED if too_old else REMOVED_OVER_CAP))
            else:
                report.kept.append((e, hold_reason(cache, e.key, grace) or KEPT_ERROR))
    if removed and not dry_run:
        log.info("jitflow: evicted %d cache entries (%d bytes)", len(removed), sum(e.size for e in removed))
    if not dry_run:
        counters.set_size(cache.root, total)      # what a walk found: later builds add to it
    return removed


def after_publish(cache: Cache, key: str, max_size: int) -> list[EntryInfo]:
    """Keep the cache under `max_size` after `key` was published (built or fetched here): prune()
    only when the entries may be over the cap. The entries' size is kept in the counters' record
    (a walk of every entry costs some 0.1 ms an entry, which a sweep of thousands would pay at every
    build); when it is unknown, or over the cap, the cache is walked and pruned, and the size
    recorded again. Staging folders whose writer is gone are removed either way."""
    remove_abandoned_staging(cache)
    size = counters.grow(cache.root, folder_size(cache.entry_dir(key)))
    if size is not None and size <= max_size:
        return []
    return prune(cache, max_size=max_size, keep=key)


def clear(cache: Cache, report: PruneReport | None = None) -> int:
    """Remove every entry (entries being built are skipped), and the staging folders whose writer is
    gone; returns how many entries were removed."""
    remove_abandoned_staging(cache)
    count = 0
    counters.set_size(cache.root, None)          # the next build walks the cache again
    for e in entries(cache):
        gone = remove_entry(cache, e.key, grace=0)
        count += gone
        if report is not None:
            if gone:
                report.removed.append((e, REMOVED_CLEAR))
            else:
                report.kept.append((e, hold_reason(cache, e.key, grace=0) or KEPT_ERROR))
    return count


