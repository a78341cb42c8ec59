"""Why a read-only cache could not serve a key, and the fix that fits why: a CacheMissError's `kind`.

- missing: no cache folder where JITFLOW_CACHE_DIR points (check it), or no entry for the key (record
  the workload, pack, unpack);
- unreadable: this user may not look into a folder on the way, or read the entry (make it readable
  to this user's uid: the `chmod` to run, or `unpack --readable`);
- untrusted: a folder or file on the way belongs to another user than this one or root, or others
  could write it (unpack as root or as this user, into a folder only its owner can write);
- damaged: the entry is there but fails its checks (unpack again: it replaces a damaged entry);
- other-inputs: no entry for the key, but one for the same module and target under other key
  inputs: the inputs that differ are named (`name: here X, in the cache Y`, key_diff.py), and the fix
  is to make them the same where the bundle is made;
- uncacheable: the module cannot be cached (the key cannot name what it holds).

"The same module" is the same label (the name it was compiled under; without a name, its
functions and the file name and line it was compiled at). Looking for it reads the entries'
metadata, bounded in count and time: it runs on a miss, never on a hit.
"""
from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Any

from ..errors import CacheMissError
from ..files import folder_trust
from .key import key_diff
from .store.disk import DAMAGED, Cache
from .store.entry import META, META_MAX_BYTES, as_json, decode_meta, label
from .key.key import CacheKey

#: at most this many entries' metadata are read, for at most this long, looking for the same module
SCAN_ENTRIES = 2000
SCAN_SECONDS = 0.25
_KEY = re.compile(r"[0-9a-f]{64}")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def miss_error(cache: Cache, cache_key: CacheKey, module_label: str, named: bool, target: str,
               origin: str | None) -> CacheMissError:
    """The CacheMissError for a key the read-only `cache` could not serve, after its lookup (whose
    refusal, if any, says why); `named`: the label is a name given at compile time."""
    args = (cache_key.digest, module_label, target, cache.folder)
    if cache_key.uncacheable:
        return CacheMissError(*args, f"this module cannot be cached: {cache_key.uncacheable}", "uncacheable",
                              "capture plain values (numbers, strings, functions of them) in what the module "
                              "registers, or give cache_salt= (or JITFLOW_CACHE_SALT) naming what it holds, where "
                              "the bundle is made and here", origin=origin)
    refusal = cache.refusal
    kind = getattr(refusal, "kind", None)
    if refusal is None or kind == folder_trust.MISSING:
        return _missing(cache, cache_key, args, module_label, named, origin)
    if kind == folder_trust.OTHER:        # a file where the cache folder should be, for one
        return CacheMissError(*args, refusal, "missing", _check_setting(cache), origin=origin)
    if kind == folder_trust.UNREADABLE:
        return CacheMissError(*args, refusal, "unreadable", _readable_fix(cache, refusal.where), origin=origin)
    if kind == DAMAGED:
        return CacheMissError(*args, refusal, "damaged",
                              f"unpack the bundle again (`jitflow cache unpack bundle.tar --cache-dir {cache.folder}`"
                              "): it checks every file and replaces a damaged entry", origin=origin)
    return CacheMissError(*args, refusal, "untrusted",
                          f"unpack as root or as this user (uid {os.getuid()}) into a folder that only its owner "
                          "can write: entries another user could have changed are never loaded", origin=origin)


def _missing(cache: Cache, cache_key: CacheKey, args: tuple[Any, ...], module_label: str, named: bool,
             origin: str | None) -> CacheMissError:
    """No cache folder, no entry, or an entry for the same module under other inputs."""
    if not os.path.isdir(cache.folder) or not os.path.isdir(cache.entries):
        gone = cache.folder if not os.path.isdir(cache.folder) else cache.entries
        return CacheMissError(*args, f"{gone} does not exist", "missing", _check_setting(cache), origin=origin)
    found = nearest(cache, cache_key, module_label, named, origin)
    if found is None:
        return CacheMissError(*args, None, "missing", origin=origin)
    key, inputs = found
    lines = key_diff.lines(as_json(cache_key.inputs), inputs)
    return CacheMissError(*args, f"it holds this module and target under other key inputs (key {key[:12]}): "
                          + "; ".join(lines), "other-inputs",
                          "give this process the key inputs of the process that made the bundle (the same lock "
                          "file, options, pass_config and JITFLOW_CACHE_SALT), or make the bundle again with "
                          "this process's", differences=lines, origin=origin)


def nearest(cache: Cache, cache_key: CacheKey, module_label: str, named: bool,
            origin: str | None) -> tuple[str, dict[str, Any]] | None:
    """(key, key inputs) of the cache's entry for the same module and target as `cache_key` with the
    fewest inputs that differ, or None; reads at most SCAN_ENTRIES entries for SCAN_SECONDS."""
    here = as_json(cache_key.inputs)
    place = _place(origin)
    deadline = time.monotonic() + SCAN_SECONDS
    best: tuple[int, str, dict[str, Any]] | None = None
    seen = 0
    for folder in _entry_folders(cache.entries):
        seen += 1
        if seen > SCAN_ENTRIES or time.monotonic() > deadline:
            break
        if folder.name == cache_key.digest:
            continue
        meta = _meta(folder)
        inputs = meta.get("key_inputs") if meta else None
        if not isinstance(inputs, dict) or inputs.get("target") != here.get("target"):
            continue
        name = meta.get("name") if isinstance(meta.get("name"), str) else None
        functions = [str(f) for f in meta.get("functions") or []]
        if label(name, functions) != module_label or (not named and place != _place(meta.get("origin"))):
            continue
        count = len(key_diff.differences(here, inputs))
        if best is None or count < best[0]:
            best = (count, folder.name, inputs)
    return None if best is None else (best[1], best[2])


def _entry_folders(entries: Path) -> Any:
    """The entry folders under `entries` (shard/key), as they are listed."""
    try:
        shards = list(os.scandir(entries))
    except OSError:
        return
    for shard in shards:
        if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
            continue
        try:
            inside = list(os.scandir(shard.path))
        except OSError:
            continue
        for item in inside:
            if _KEY.fullmatch(item.name) and item.name.startswith(shard.name):
                yield Path(item.path)


def _meta(folder: Path) -> dict[str, Any] | None:
    """An entry's metadata read as untrusted input: a regular file, no link, bounded; None otherwise."""
    try:
        fd = os.open(folder / META, _READ_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return decode_meta(f.read(META_MAX_BYTES + 1))[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def _place(origin: Any) -> tuple[str, str] | None:
    """An origin ('/ci/app/serve.py:12') as (file name, line): the folders differ between machines."""
    if not isinstance(origin, str) or ":" not in origin:
        return None
    file, _, line = origin.rpartition(":")
    return os.path.basename(file), line


def _check_setting(cache: Cache) -> str:
    return (f"check JITFLOW_CACHE_DIR (it names {cache.folder}): set it to the folder the bundle was unpacked "
            f"into, or unpack it there (`jitflow cache unpack bundle.tar --cache-dir {cache.folder} --readable`)")


def _readable_fix(cache: Cache, where: str) -> str:
    """How to let this user read the cache, for a refusal at `where` (a folder above it, or in it)."""
    uid = os.getuid()
    inside = where and Path(where).is_relative_to(cache.folder)
    if not where or inside:
        return (f"make it readable to uid {uid}: as its owner, `chmod -R go+rX {cache.folder}`, or unpack with "
                f"`jitflow cache unpack bundle.tar --cache-dir {cache.folder} --readable`")
    return (f"make the folders on the way readable to uid {uid}: as their owner, `chmod go+rx {where}` (then "
            f"`jitflow cache unpack ... --readable` makes the cache readable too)")
