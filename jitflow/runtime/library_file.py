"""A library file held open, so that what was checked is what gets loaded.

Checking a path and then loading the path leaves a window in which the name can be pointed at
another file. Here every check (the cache's sha256, the checks before dlopen) reads through one open
file, and the loader opens that same file through /proc/self/fd: renaming, replacing or deleting the
name afterwards changes nothing. No folder is involved (none that another user could swap).
"""
from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

_PROC_FD = "/proc/self/fd"
_serial = itertools.count(1)
_serial_lock = threading.Lock()


def unique_fd_path(fd: int, serial: int) -> str:
    """/proc/self/fd/<fd>, spelled differently for every `serial` (a path the loader has never seen).

    The dynamic loader hands back the library it loaded before under the same name, and descriptor
    numbers are reused, so the name must be new to the process: "./" and ".//" (one component each,
    both the folder itself) spell the serial's binary digits between the folder and the number.
    """
    digits = bin(serial)[2:]
    return _PROC_FD + "/" + "".join(".//" if d == "1" else "./" for d in digits) + str(fd)


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a folder: nothing to load, and nothing to wait on."""


class LibraryFile:
    """An open, read-only library file and the path it was found at (for messages)."""

    def __init__(self, fd: int, path: str | os.PathLike) -> None:
        self.fd = fd
        self.path = Path(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> LibraryFile:
        """Open `path` for reading without blocking (a FIFO would wait for a writer): OSError when it
        cannot be opened, NotRegularFile when it is not a regular file."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind})", str(path))
        return cls(fd, path)

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    @contextmanager
    def loader_path(self) -> Iterator[str]:
        """A path, new to this process, that the dynamic loader resolves to this very file."""
        if not os.path.isdir(_PROC_FD):
            yield str(self.path)  # no /proc: the cache's folder checks are what protects the path
            return
        with _serial_lock:
            serial = next(_serial)
        yield unique_fd_path(self.fd, serial)

    def stream(self) -> IO[bytes]:
        """The file's bytes from the start, through a duplicate of the descriptor."""
        dup = os.dup(self.fd)
        os.lseek(dup, 0, os.SEEK_SET)
        return os.fdopen(dup, "rb")

    def copy_to(self, out: IO[bytes]) -> None:
        with self.stream() as src:
            shutil.copyfileobj(src, out)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> LibraryFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"<LibraryFile {self.path} fd={self.fd}>"
