"""Files jitflow keeps between processes outside the disk cache's entries (remembered compiler
commands, precompiled headers and their directive files, shared objects and their manifests,
install memos), read back as untrusted input.

A file is used only if, opened without following a link and without blocking (O_NOFOLLOW |
O_NONBLOCK: a FIFO put in its place cannot hang a build), the descriptor shows a regular file,
owned by this user (or by one of the owners the caller names), that no one else may write, no
larger than the caller's bound, in folders (from the caller's `root` down, each opened the same way)
of the same owners that no one else may write. Its contents are then the caller's to check against
what jitflow itself writes. A refused file is reported once and treated as missing: its caller
makes it again and replaces it. Files are written whole under a temporary name, private to the
user, and renamed into place (a link or a FIFO at the name is replaced, never written through).

The folder these files live in is made and checked by folder_trust.py (zig's cache folder, say),
which refuses one that others could write rather than narrowing it and trusting what it holds.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ..logs import warn_once
from .folder_trust import writable_by_others

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Untrusted(Exception):
    """A kept file or folder that exists but must not be used (the message says why)."""


def _owners(owners: Iterable[int] | None) -> frozenset[int]:
    return frozenset([os.getuid()] if owners is None else owners)


def _check(fd: int, where: str, folder: bool, owners: frozenset[int], max_bytes: int | None) -> None:
    """Raise Untrusted unless `fd` is a folder (or a regular file of at most `max_bytes`) of one of
    `owners` that no one else may write."""
    st = os.fstat(fd)
    if folder and not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{where} is not a folder")
    if not folder and not stat.S_ISREG(st.st_mode):
        raise Untrusted(f"{where} is not a regular file (mode {stat.filemode(st.st_mode)})")
    if st.st_uid not in owners:
        raise Untrusted(f"{where} belongs to another user (uid {st.st_uid})")
    if writable_by_others(st, st.st_uid):
        raise Untrusted(f"{where} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")
    if max_bytes is not None and st.st_size > max_bytes:
        raise Untrusted(f"{where} is larger than {max_bytes} bytes ({st.st_size})")


def _open(name: str | os.PathLike, where: str, dir_fd: int | None, folder: bool, owners: frozenset[int],
          max_bytes: int | None = None, follow: bool = False) -> int:
    """One component opened (a link refused unless `follow`) and checked; FileNotFoundError if absent."""
    flags = _FOLDER if folder else _FILE
    try:
        fd = os.open(name, flags & ~os.O_NOFOLLOW if follow else flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Untrusted(f"{where} is a symbolic link") from None
        if exc.errno == errno.ENOTDIR:
            raise Untrusted(f"{where} is not a folder") from None
        raise Untrusted(f"{where} cannot be opened: {exc.strerror}") from None
    try:
        _check(fd, where, folder, owners, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, max_bytes: int, root: Path | None = None, owners: Iterable[int] | None = None) -> int:
    """A read-only descriptor of the kept file `path` (the module's rules); FileNotFoundError where
    it (or a folder on the way) is missing, Untrusted where it must not be used. With `root`, every
    folder from `root` down is checked (`root` itself may be reached through links, which its own
    checks, folder_trust's, have judged); without, the folder `path` is in."""
    path, ok = Path(path), _owners(owners)
    if root is not None:
        parts = path.relative_to(root).parts
        fd = _open(root, str(root), None, True, ok, follow=True)
    else:
        parts = (path.name,)
        fd = _open(path.parent, str(path.parent), None, True, ok)
    where = Path(root) if root is not None else path.parent
    try:
        for part in parts[:-1]:
            where = where / part
            parent, fd = fd, -1
            try:
                fd = _open(part, str(where), parent, True, ok)
            finally:
                os.close(parent)
        return _open(parts[-1], str(path), fd, False, ok, max_bytes)
    finally:
        if fd >= 0:
            os.close(fd)


def _refused(path: Path, exc: Untrusted) -> None:
    warn_once(f"kept file {path}", "jitflow: not using %s (%s); it is made again", path, exc)


def read_bytes(path: Path, max_bytes: int, root: Path | None = None, owners: Iterable[int] | None = None,
               head: int | None = None) -> bytes | None:
    """The bytes of the kept file `path` (its first `head` bytes, if given), or None where it is
    missing or must not be used (said once)."""
    try:
        fd = open_file(path, max_bytes, root, owners)
    except FileNotFoundError:
        return None
    except Untrusted as exc:
        _refused(Path(path), exc)
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_bytes + 1 if head is None else head)
    except OSError:
        return None
    return data if len(data) <= max_bytes else None     # it grew meanwhile: not what was checked


def read_json(path: Path, max_bytes: int, root: Path | None = None, owners: Iterable[int] | None = None) -> Any:
    """The JSON value of the kept file `path`, or None (missing, refused, not JSON)."""
    data = read_bytes(path, max_bytes, root, owners)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def sha256(path: Path, max_bytes: int, root: Path | None = None) -> str | None:
    """sha256 of the kept file `path`, read through the descriptor that was checked; None where it is
    missing or must not be used (said once)."""
    try:
        fd = open_file(path, max_bytes, root)
    except FileNotFoundError:
        return None
    except Untrusted as exc:
        _refused(Path(path), exc)
        return None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def problem(path: Path, max_bytes: int, root: Path | None = None) -> str | None:
    """Why the kept file `path` must not be used (or is missing), or None when it may be: for a file
    another program reads by its name (a precompiled header given to clang) in a folder only this
    user can change, so that the answer stays true."""
    try:
        os.close(open_file(path, max_bytes, root))
    except FileNotFoundError:
        return f"{path} does not exist"
    except Untrusted as exc:
        return str(exc)
    return None


def private_folder(path: Path) -> bool:
    """Make the folder `path` (its parent exists) private to this user, or check the one there: True
    when it is a folder of this user, not a link, that no one else may write."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        os.close(_open(path, str(path), None, True, _owners(None)))
    except (OSError, Untrusted):
        return False
    return True


def write_bytes(path: Path, data: bytes) -> bool:
    """Put `data` at `path` whole (a private temporary file renamed over whatever is there); False
    where the folder cannot be written."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def discard(path: Path) -> None:
    """Remove the kept file `path` (a link or a FIFO at the name itself, never what it points to)."""
    try:
        os.unlink(path)
    except OSError:
        pass
