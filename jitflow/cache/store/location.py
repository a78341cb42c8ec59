"""Which cache folders a process uses, and the one way to open a cache: open_cache(settings).

The location rules:

- builds use the configured folder (cache_dir=, JITFLOW_CACHE_DIR, else the user cache folder)
  when it can be written and nobody but this user can change it (files/folder_trust.py);
- a configured folder that cannot be written (read-only, no home directory, a file in the way),
  or that another user could change (it or a folder above it is theirs, or writable by others),
  means a private per-user fallback folder for the process, with one warning that says why. A
  read-only configured folder still serves its entries; one that others could change is never read.
  One that root owns and this user cannot write is most likely an image's prebuilt cache: the
  warning says to serve it with JITFLOW_CACHE=readonly;
- the fallback folder, at a predictable name under the temporary folder, is used only if it is
  ours and private; if another user created it first, this process uses a fresh private folder
  of its own (and says so);
- with caching off, nothing is looked up or kept: each build gets a temporary folder of its own
  (NullCache), removed when its library is released;
- a read-only cache (JITFLOW_CACHE=readonly) is the configured folder alone, looked up and never
  written (disk.py says which folders it trusts): no fallback folder, since nothing is built;
- the admin commands (`jitflow cache ...`) work on the configured folder only, and refuse one that
  others could change, with the reason (CacheFolders.for_admin).

zig's cache is not in these folders: see toolchain/zig_cc/zig_cache.py.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ...config import Settings
from ...errors import CacheError, UntrustedFolderError
from ...files import folder_trust
from ...logs import warn_once
from ...runtime.library_file import LibraryFile
from .disk import FIX, Cache

_private: dict[str, Path] = {}   # per process: the folder used when the shared fallback is refused


def open_cache(settings: Settings) -> CacheFolders:
    """The cache folders of these settings, by the location rules (the module's docstring): the only
    way code outside jitflow/cache opens a cache."""
    return CacheFolders(settings)


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
    """`cache` if it can be written and trusted; else a per-user temporary one, with one warning
    that says why (a CacheError: read-only, not a folder; an UntrustedFolderError: others can change it)."""
    try:
        cache.ensure()
        return cache
    except CacheError as exc:
        try:
            fallback = Cache(fallback_folder())
            fallback.ensure()
        except (CacheError, OSError):
            raise exc from None
        warn_once("cache fallback", "jitflow: %s; using %s for this process instead", root_owned(cache) or exc,
                  fallback.folder)
        return fallback


def root_owned(cache: Cache) -> str | None:
    """Why a cache that root owns, and this user (not root) cannot write, is not used for builds, with
    the fix: read-only mode, which trusts root's folders and builds nothing; None for any other cache."""
    uid = os.getuid()
    if uid == 0:
        return None
    for folder in (cache.root, cache.folder):
        try:
            owner = os.stat(folder).st_uid
        except OSError:
            continue
        if owner != 0 or os.access(folder, os.W_OK):
            return None
        return (f"the cache {cache.folder} belongs to root and this user (uid {uid}) cannot write it: to serve the "
                "entries it holds (an image's, unpacked by root), set JITFLOW_CACHE=readonly, which trusts root's "
                "folders and builds nothing")
    return None


class CacheFolders:
    """The cache of one configuration: the configured folder, and the fallback folder where builds
    go when the configured one cannot be used."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.configured = Cache(settings.cache_dir, readonly=settings.cache_readonly)
        self._building: Cache | None = None

    def search(self) -> Iterator[Cache]:
        """The caches to look an entry up in, in order: the configured one, then the one builds use if
        that is another (the fallback). None with caching off."""
        if not self.settings.cache_enabled:
            return
        yield self.configured     # its lookup refuses it if others could change it (disk.py)
        if self.settings.cache_readonly:
            return                # nothing is built, so there is no fallback folder to look in
        building = self.for_building()
        if building is not self.configured:
            yield building

    def entry_folders(self, prefix: str = "") -> list[Path]:
        """The entry folders whose key starts with `prefix` (hex), in search order."""
        pattern = f"{prefix[:2]}/{prefix}*" if len(prefix) >= 2 else f"{prefix}*/*"
        found: list[Path] = []
        try:
            for cache in self.search():
                if cache is not self.configured or self._untrusted() is None:   # never read what others can change
                    found += sorted(cache.entries.glob(pattern))
        except (CacheError, OSError):
            pass   # no fallback can be made, or a folder cannot be listed: what was found so far
        return found

    def for_building(self) -> Cache | NullCache:
        """The cache builds publish to: the configured one, else the fallback (one warning saying
        why); a NullCache with caching off."""
        if not self.settings.cache_enabled:
            return NullCache(self)
        if self.settings.cache_readonly:
            raise CacheError(f"the cache {self.configured.folder} is read-only (JITFLOW_CACHE=readonly): "
                             "nothing is built or stored in it")
        if self._building is None:
            self._building = usable(self.configured)
        return self._building

    def for_admin(self, writes: str | None = None) -> Cache:
        """The configured cache, for the admin commands: an UntrustedFolderError (with the reason
        and the fix) when others could change it, a CacheError when a file is in the way, or when the
        command `writes` (one that changes the cache) meets a read-only cache."""
        from ...doctor.checks import cache_dir_problem   # doctor's check: not needed by lookups and builds

        if writes and self.settings.cache_readonly:
            raise CacheError(f"`jitflow {writes}` would change the cache {self.configured.folder}, and "
                             "JITFLOW_CACHE=readonly keeps it for lookups only: nothing was changed. Fix: run it "
                             f"without the read-only setting, e.g. `JITFLOW_CACHE=1 jitflow {writes} ...`")

        problem = cache_dir_problem(self.configured.folder, writing=False)
        if problem:
            raise CacheError(f"cannot use the cache {self.configured.folder}: {problem}; "
                             "give --cache-dir or set JITFLOW_CACHE_DIR to a folder")
        untrusted = self._untrusted()
        if untrusted:
            raise UntrustedFolderError(self.configured.folder, untrusted, FIX)
        return self.configured

    def problem(self) -> str | None:
        """Why builds do not use the configured folder (they use the fallback then), or None; for a
        read-only cache, why lookups cannot use it. Looks only: creates nothing."""
        from ...doctor.checks import cache_dir_problem

        readonly = self.settings.cache_readonly
        found = cache_dir_problem(self.configured.folder, writing=not readonly)
        if found:
            return (None if readonly else root_owned(self.configured)) or found
        if readonly and not os.path.isdir(self.configured.root):
            return f"{self.configured.root} does not exist (nothing was unpacked into it)"
        untrusted = self._untrusted()
        return f"not trusted: {untrusted}" if untrusted else None

    def _untrusted(self) -> str | None:
        """Why others could change the configured cache (its deepest existing folder), or None."""
        for folder in (self.configured.root, self.configured.folder):
            if os.path.lexists(folder):
                return folder_trust.folder_problem(folder, installed=self.configured.readonly)
        return folder_trust.folder_problem(_existing_parent(self.configured.folder), parent=True)


def _existing_parent(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


class NullCache:
    """The cache when caching is off (cache=False, JITFLOW_CACHE=0): nothing is found or kept.

    Each build gets a temporary folder of its own, removed if the build fails and otherwise when
    its library is released (release): this class is the one owner of that clean-up. The sources
    of a failed build are still kept, under the folder the location rules choose (sources_root).
    """

    def __init__(self, folders: CacheFolders) -> None:
        self._folders = folders

    @contextmanager
    def build_folder(self) -> Iterator[Path]:
        """A private temporary folder to build in; removed if the block raises."""
        folder = Path(tempfile.mkdtemp(prefix="jitflow-"))
        try:
            yield folder
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def sources_root(self) -> Path:
        """Where a failed build's sources are kept (`<cache>/v1/failed/`): the cache builds would use."""
        return usable(self._folders.configured).root

    def release(self, library: LibraryFile) -> None:
        """Done with a library built here: close it and remove its temporary folder."""
        library.close()
        shutil.rmtree(library.path.parent, ignore_errors=True)

    def __repr__(self) -> str:
        return "<NullCache: caching is off>"
