"""The disk cache: one entry folder per key (see entry.py), found, verified, locked and published.

Entries are built in a staging folder inside the cache, then published by one rename under a
per-key file lock; a lookup verifies the library's sha256 before anyone loads it.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import CacheError
from .entry import FORMAT_VERSION, LIBRARY, Entry, discard, library_problem, meta_problem, sha256_file

log = logging.getLogger("jitflow")


def _mkdir_private(path: Path) -> None:
    """Create path and any missing parents, each readable by the user alone."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


class Cache:
    """A jitflow cache directory (its format version folder under the configured root)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / f"v{FORMAT_VERSION}"
        self.entries = self.root / "entries"
        self.locks = self.root / "locks"
        self.staging_root = self.root / "staging"

    def ensure(self) -> None:
        """Create the cache folders (private to the user) or raise CacheError naming the fix."""
        try:
            for d in (self.entries, self.locks, self.staging_root):
                _mkdir_private(d)
            for d in (self.root, self.entries, self.locks, self.staging_root):
                if d.stat().st_mode & 0o077 and d.stat().st_uid == os.getuid():
                    os.chmod(d, 0o700)
        except OSError as exc:
            raise CacheError(
                f"cannot create the cache directory {self.root}: {exc.strerror}; "
                "set JITFLOW_CACHE_DIR to a writable folder or JITFLOW_CACHE=0") from None

    def entry(self, key: str) -> Entry:
        return Entry(self.entries / key[:2] / key)

    def entry_dir(self, key: str) -> Path:
        return self.entry(key).folder

    def read_meta(self, key: str) -> dict[str, Any] | None:
        return self.entry(key).read_meta()

    def lookup(self, key: str, expect: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]] | None:
        """The verified library and metadata of `key`, or None (missing, unsafe or bad: rebuild).

        `expect` is the key's inputs (versions, target, options): an entry recording others is refused.
        """
        entry = self.entry(key)
        meta = entry.read_meta()
        if meta is None:
            if entry.folder.exists() or entry.folder.is_symlink():
                log.warning("jitflow: cache entry %s has no readable metadata; rebuilding", key[:12])
            return None
        problem = self._unsafe(entry) or self._verify(meta, key, entry.library, expect)
        if problem:
            log.warning("jitflow: cache entry %s refused (%s); rebuilding", key[:12], problem)
            return None
        try:
            entry.used.touch()
        except OSError:
            pass
        return entry.library, meta

    def _unsafe(self, entry: Entry) -> str | None:
        """Why loading this entry could run someone else's code, or None: every folder from the
        cache's version folder down, and the library, must be ours, not links, not writable by others."""
        uid = os.getuid()
        for path in (self.root, self.entries, entry.folder.parent, entry.folder, entry.library):
            try:
                st = os.lstat(path)
            except OSError:
                return f"{path.name} is missing"
            if stat.S_ISLNK(st.st_mode):
                return f"{path} is a symbolic link"
            if st.st_uid != uid:
                return f"{path} is owned by user {st.st_uid}, not {uid}"
            if st.st_mode & 0o022:
                return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        return None

    @staticmethod
    def _verify(meta: dict[str, Any], key: str, lib: Path, expect: dict[str, Any] | None = None) -> str | None:
        problem = meta_problem(meta, key, expect)
        if problem:
            return problem
        try:
            size = lib.stat().st_size
        except OSError:
            return "library missing"
        return library_problem(meta, size, sha256_file(lib) if size == meta.get("so_size") else "")

    @contextmanager
    def lock(self, key: str, timeout: float = -1) -> Iterator[None]:
        """Hold the per-key build lock (released by the OS if the holder dies)."""
        from filelock import FileLock

        with FileLock(str(self.locks / f"{key}.lock"), timeout=timeout):
            yield

    @contextmanager
    def staging(self, key: str) -> Iterator[Path]:
        """A fresh folder inside the cache to build into; removed afterwards unless published."""
        folder = Path(tempfile.mkdtemp(prefix=f"{key[:16]}.", dir=self.staging_root))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def publish(self, key: str, folder: Path, meta: dict[str, Any]) -> Path:
        """Write the metadata, then move the staged folder into place in one rename."""
        staged = Entry(folder)
        meta = dict(meta, key=key, format=FORMAT_VERSION, so_size=staged.library.stat().st_size,
                    so_sha256=sha256_file(staged.library), created=meta.get("created", time.time()))
        staged.meta_path.write_text(json.dumps(meta, indent=1, sort_keys=True, default=str))
        staged.used.touch()
        final = self.entry_dir(key)
        _mkdir_private(final.parent)
        if final.exists() or final.is_symlink():  # a refused entry: we hold the lock, so replace it
            discard(final, self.staging_root)
        os.rename(folder, final)
        folder.mkdir()  # so that staging()'s cleanup finds a folder to remove
        return final / LIBRARY
