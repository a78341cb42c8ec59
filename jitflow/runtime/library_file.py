"""A library file held open, so that what was checked is what gets loaded.

Checking a path and then loading the path leaves a window in which the name can be pointed at
another file. Here every check (the cache's sha256, the ELF checks before dlopen) reads through
one open file, and the loader opens that same file through /proc/self/fd: renaming, replacing or
deleting the name afterwards changes nothing.
"""
from __future__ import annotations

import atexit
import itertools
import os
import secrets
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

_PROC_FD = "/proc/self/fd"
_serial = itertools.count()
_links: list[str] = []
_links_lock = threading.Lock()


def _link_folder() -> str:
    """This process's private folder for loader links, in the temporary folder (removed at exit).

    Made with os.mkdir under a random name rather than tempfile.mkdtemp, whose first call probes
    the temporary folder by writing files (a third of a millisecond on a cache hit)."""
    with _links_lock:
        if not _links or not os.path.isdir(_links[0]):
            base = os.environ.get("TMPDIR") or tempfile.tempdir or "/tmp"
            while True:
                folder = os.path.join(base, f"jitflow-load-{os.getpid()}-{secrets.token_hex(6)}")
                try:
                    os.mkdir(folder, 0o700)
                    break
                except FileExistsError:
                    continue
            _links[:] = [folder]
            atexit.register(shutil.rmtree, folder, True)
        return _links[0]


class LibraryFile:
    """An open, read-only library file and the path it was found at (for messages)."""

    def __init__(self, fd: int, path: str | os.PathLike) -> None:
        self.fd = fd
        self.path = Path(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> LibraryFile:
        """Open `path` for reading (OSError when it cannot be)."""
        return cls(os.open(path, os.O_RDONLY | os.O_CLOEXEC), path)

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    @contextmanager
    def loader_path(self) -> Iterator[str]:
        """A path, new to this process, that the dynamic loader resolves to this very file.

        dlopen returns an already loaded library when the name matches one it loaded before, and
        descriptor numbers are reused: so the name is a link with a unique name, in a private
        folder of this process, to /proc/self/fd/<fd>. The link goes away after the block.
        """
        if not os.path.isdir(_PROC_FD):
            yield str(self.path)  # no /proc: the cache's folder checks are what protects the path
            return
        link = os.path.join(_link_folder(), f"{next(_serial)}-{self.path.name}")
        os.symlink(f"{_PROC_FD}/{self.fd}", link)
        try:
            yield link
        finally:
            os.unlink(link)

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
