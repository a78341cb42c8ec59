"""The disk cache: one entry folder per key (see entry.py), found, verified, locked and published.

Entries are built in a staging folder inside the cache, then published by one rename under a
per-key file lock. A lookup checks that nobody else can change the cache (files/folder_trust.py), opens the
entry's folders and files without following links, and verifies the library's sha256 through the
descriptor it then hands out (a LibraryFile): the bytes checked are the bytes loaded, even if the
entry is pruned or replaced meanwhile.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any, ContextManager

from ...errors import CacheError, UntrustedFolderError
from ...files import folder_trust
from ...runtime.library_file import LibraryFile
from . import staging
from .entry import (FORMAT_VERSION, LIBRARY, META, READ_FLAGS, USED, Entry, as_json, discard, library_problem,
                    meta_problem, meta_text, read_meta_file)

log = logging.getLogger("jitflow")

#: what the cache's error messages advise when a folder is refused
FIX = "or set JITFLOW_CACHE_DIR to a folder of your own such as ~/.cache/jitflow"
#: the kind of a refusal (Cache.refusal.kind) for an entry whose files fail their checks; the others
#: are folder_trust's (missing, unreadable, untrusted, other)
DAMAGED = "damaged"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = READ_FLAGS      # never through a link, never waiting on a FIFO; _checked wants a regular file


class _Refused(Exception):
    """An entry that exists but must not be loaded (the message says why; `kind` and `where` as a
    folder_trust.Problem has them: UNREADABLE, UNTRUSTED, or DAMAGED)."""

    def __init__(self, text: str, kind: str = DAMAGED, where: str = "") -> None:
        super().__init__(text)
        self.kind, self.where = kind, where


def sha256_fd(fd: int) -> str:
    """sha256 of an open file's bytes, read in chunks (a map of the file would fault if it shrank) into
    a buffer no larger than the file: a fresh megabyte costs a small library's hit half a millisecond."""
    h = hashlib.sha256()
    buffer = memoryview(bytearray(min(1 << 20, max(os.fstat(fd).st_size, 1))))
    at = 0
    while n := os.preadv(fd, [buffer], at):
        h.update(buffer[:n])
        at += n
    return h.hexdigest()


def _checked(fd: int, where: str, folder: bool, readonly: bool = False) -> int:
    """`fd` if it is a folder (or a regular file) of this user (or, `readonly`, of root) that others
    cannot write; else _Refused."""
    st = os.fstat(fd)
    kind_ok = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    problem = None
    if not kind_ok:
        problem = f"{where} is not a {'folder' if folder else 'regular file'}"
    elif st.st_uid != os.getuid() and not (readonly and st.st_uid == 0):
        problem = f"{where} is owned by user {st.st_uid}, not {os.getuid()}" + (" or root" if readonly else "")
    elif st.st_mode & 0o022:
        problem = f"{where} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if problem:
        os.close(fd)
        raise _Refused(problem, DAMAGED if not kind_ok else folder_trust.UNTRUSTED, where)
    return fd


def _open(name: str | os.PathLike, where: str, dir_fd: int | None, folder: bool, readonly: bool = False) -> int:
    """Open one component without following a link, and check it."""
    try:
        fd = os.open(name, _DIR_FLAGS if folder else _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if exc.errno == errno.ELOOP:
            raise _Refused(f"{where} is a symbolic link", DAMAGED, where) from None
        if exc.errno == errno.ENOTDIR:
            raise _Refused(f"{where} is not a folder", DAMAGED, where) from None
        kind = folder_trust.UNREADABLE if exc.errno in (errno.EACCES, errno.EPERM) else DAMAGED
        raise _Refused(f"{where}: {exc.strerror}", kind, where) from None
    return _checked(fd, where, folder, readonly)


class Cache:
    """A jitflow cache directory (its format version folder under the configured root).

    `readonly` (JITFLOW_CACHE=readonly): lookups only, and nothing is written under the folder (not
    even an entry's last use). Since nothing is written, a folder that root owns is trusted as
    well as one of this user's: a cache unpacked into a container image by root and served by
    another user. Either way, nobody else may be able to write it or a folder above it.
    """

    def __init__(self, root: Path, readonly: bool = False) -> None:
        self.readonly = readonly
        #: why the last lookup found no usable entry, when something was there but refused (or None):
        #: the reason in words, with its kind (folder_trust's kinds, or DAMAGED) and where
        self.refusal: folder_trust.Problem | None = None
        self.folder = Path(root)
        self.root = self.folder / f"v{FORMAT_VERSION}"
        self.entries = self.root / "entries"
        self.locks = self.root / "locks"
        self.staging_root = self.root / "staging"

    def ensure(self, readable: bool = False, parents: int | None = None) -> None:
        """Create the cache folders or raise CacheError naming the fix: UntrustedFolderError (a
        CacheError) when a folder on the way could be changed by another user.

        The folders inside the cache (v1/ and below) are created private to the user, or, with
        `readable`, readable by every user (the cache folder, v1/ and every entry widened to that
        where they exist): `jitflow cache unpack --readable`. The cache folder and the missing folders above it are
        created 0700, or with `parents` as `mkdir -p` makes them. No folder that exists is narrowed.
        """
        try:
            if os.path.lexists(self.folder):
                folder_trust.check_folder(self.folder, FIX)   # the user's own folder: checked, never narrowed
            else:
                folder_trust.make_folder(self.folder, FIX, parents=parents, readable=parents is not None)
            for d in (self.root, self.entries):
                folder_trust.make_folder(d, FIX, readable=readable)
            if readable:       # and every entry there already, for a service running as another user
                for d in (self.folder, self.root):
                    folder_trust.make_readable(d, deep=False)
                folder_trust.make_readable(self.entries)
            for d in (self.locks, self.staging_root):
                folder_trust.make_folder(d, FIX)
            if not os.access(self.root, os.W_OK):
                raise PermissionError(13, "not writable")
        except UntrustedFolderError:
            raise
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

    def lookup(self, key: str, expect: dict[str, Any] | None = None) -> tuple[LibraryFile, dict[str, Any]] | None:
        """The verified library (held open) and metadata of `key`, or None (missing, unsafe or bad: rebuild).

        `expect` is the key's inputs (versions, target, options): an entry recording others is refused.
        A cache folder that others could change gives None here; ensure() then says why (and
        `refusal`, for a read-only cache).
        """
        self.refusal = folder_trust.folder_problem(self.root, installed=self.readonly)
        if self.refusal is not None:
            return None
        try:
            return self._open_entry(key, expect)
        except FileNotFoundError:
            return None
        except _Refused as exc:
            self.refusal = folder_trust.Problem(f"its entry was refused: {exc}", exc.kind, exc.where)
            log.warning("jitflow: cache entry %s refused (%s); %s", key[:12], exc,
                        "not used (read-only cache)" if self.readonly else "rebuilding")
            return None

    def _open_entry(self, key: str, expect: dict[str, Any] | None) -> tuple[LibraryFile, dict[str, Any]]:
        """Walk root -> entries -> shard -> entry through descriptors, then read and verify the entry."""
        entry = self.entry(key)
        ro = self.readonly
        fd = _open(self.root, str(self.root), None, folder=True, readonly=ro)
        try:
            for name, path in (("entries", self.entries), (key[:2], entry.folder.parent), (key, entry.folder)):
                parent, fd = fd, -1
                try:
                    fd = _open(name, str(path), parent, folder=True, readonly=ro)
                finally:
                    os.close(parent)
            try:
                meta_fd = _open(META, str(entry.meta_path), fd, folder=False, readonly=ro)
            except FileNotFoundError:
                raise _Refused("no metadata") from None
            with os.fdopen(meta_fd, "rb") as f:
                meta, problem = read_meta_file(f)
            problem = problem or meta_problem(meta, key, expect)
            if problem:
                raise _Refused(problem)
            try:
                lib_fd = _open(LIBRARY, str(entry.library), fd, folder=False, readonly=ro)
            except FileNotFoundError:
                raise _Refused("library missing") from None
            library = LibraryFile(lib_fd, entry.library)
            size = library.size
            problem = library_problem(meta, size, sha256_fd(lib_fd) if size == meta.get("so_size") else "")
            if problem:
                library.close()
                raise _Refused(problem)
            if not ro:
                _touch(USED, fd)
            return library, meta
        finally:
            if fd >= 0:
                os.close(fd)

    def release(self, library: LibraryFile) -> None:
        """Done with a library found or published here: close it (the entry stays)."""
        library.close()

    def lock(self, key: str, timeout: float = -1) -> ContextManager[None]:
        """Hold the per-key build lock (freed by the OS when the holder dies; key_lock.py says why
        a record lock); LockTimeout when not had within `timeout` seconds (< 0: wait for ever)."""
        from . import key_lock   # a build's: a hit takes no lock

        return key_lock.hold(self.locks / f"{key}.lock", timeout)

    def staging(self, key: str) -> ContextManager[Path]:
        """A fresh folder inside the cache to build into, held while the block runs (staging.py: a
        cleaner removes it once its writer is gone); removed afterwards unless published."""
        return staging.held_folder(self.staging_root, key[:16])

    def publish(self, key: str, folder: Path, meta: dict[str, Any],
                readable: bool = False) -> tuple[LibraryFile, dict[str, Any]]:
        """Write the metadata, then move the staged folder into place in one rename; private to the
        user, or with `readable` readable (never writable) by every user.

        Returns the library held open (its sha256 is the one recorded) and the metadata as stored.
        """
        staged = Entry(folder)
        lib_fd = os.open(staged.library, _FILE_FLAGS)
        library = LibraryFile(lib_fd, self.entry(key).library)
        try:
            os.fchmod(lib_fd, stat.S_IMODE(os.fstat(lib_fd).st_mode) & ~0o022)
            meta = as_json(dict(meta, key=key, format=FORMAT_VERSION, so_size=library.size,
                                so_sha256=sha256_fd(lib_fd), created=meta.get("created", time.time())))
            staged.meta_path.write_text(meta_text(meta))
            os.chmod(staged.meta_path, 0o600)
            staged.used.touch(mode=0o600)
            final = self.entry_dir(key)
            folder_trust.make_folder(final.parent, FIX, readable=readable)
            if readable:
                folder_trust.make_readable(final.parent, deep=False)
                folder_trust.make_readable(folder)
            if final.exists() or final.is_symlink():  # a refused entry: we hold the lock, so replace it
                discard(final, self.staging_root)
            os.rename(folder, final)   # staging()'s cleanup then finds nothing to remove
        except BaseException:
            library.close()
            raise
        return library, meta


def _touch(name: str, dir_fd: int) -> None:
    """Mark the entry used now (its last_used file's time), never failing a lookup."""
    try:
        os.utime(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        try:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd))
        except OSError:
            pass
    except OSError:
        pass
