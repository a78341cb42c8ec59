"""Staging folders inside a cache (`<cache>/v1/staging/`): where a build or an unpack lays an entry out
before it is published by one rename, and how the folders of writers that died are found.

A staging folder is made held: its writer takes an exclusive flock on the folder itself, which the
kernel frees when the writer's last descriptor of it closes, that is when the writer ends, however
(SIGKILL included). Whoever cleans the staging area (prune, clear, an unpack, a publish) removes a
held folder only once it can take that lock itself, so never one a live process is using, and at
once after its writer died. An flock belongs to the open file, not the process, so a cleaner in the
writer's own process sees it held too. A cleaner that takes the lock between the writer making the
folder and locking it removes it; the writer then finds its folder gone (before or after opening
it) and makes another.

Folders not made this way (older jitflow's, the moments of a removal: `old.*`) are removed once
they are older than an hour, as before.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

#: the name every held staging folder starts with
HELD = "held."
#: a staging folder that is not held and older than this belongs to a writer that died
STALE_SECONDS = 3600.0
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Held:
    """A new private folder in the staging area `root`, held by this process until release()."""

    def __init__(self, root: Path, prefix: str) -> None:
        while True:
            folder = tempfile.mkdtemp(prefix=f"{HELD}{prefix}.", dir=root)
            try:
                fd = os.open(folder, _DIR_FLAGS)
            except FileNotFoundError:
                continue                        # a cleaner found it free and removed it: make another
            fcntl.flock(fd, fcntl.LOCK_EX)      # waits only while a cleaner that found it free removes it
            if os.fstat(fd).st_nlink:
                break
            os.close(fd)                        # removed before it was held: make another
        self.folder, self._fd = Path(folder), fd

    def release(self) -> None:
        """Remove the folder (unless it was moved away: published), then let go of it."""
        if self._fd >= 0:
            shutil.rmtree(self.folder, ignore_errors=True)
            os.close(self._fd)
            self._fd = -1


def hold(root: Path, prefix: str) -> Held:
    """A new folder named `prefix` in the staging area `root`, held until its release()."""
    return Held(root, prefix)


@contextmanager
def held_folder(root: Path, prefix: str) -> Iterator[Path]:
    """A new folder in the staging area `root`, held for the block and removed after it unless it
    was moved away (published)."""
    held = hold(root, prefix)
    try:
        yield held.folder
    finally:
        held.release()


def _writer_gone(folder: Path) -> int | None:
    """A descriptor holding `folder`'s lock (the caller removes the folder, then closes it) when its
    writer is gone; None while the writer holds it (or it cannot be opened: gone already)."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_abandoned(root: Path, older_than: float = STALE_SECONDS) -> int:
    """Remove the staging folders of `root` whose writer is gone: held ones whose lock is free, others
    older than `older_than` seconds. How many were removed."""
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    removed, now = 0, time.time()
    for name in names:
        folder = root / name
        if name.startswith(HELD):
            fd = _writer_gone(folder)
            if fd is None:
                continue
            try:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                os.close(fd)
            removed += 1
            continue
        try:
            if now - os.lstat(folder).st_mtime <= older_than:
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed
