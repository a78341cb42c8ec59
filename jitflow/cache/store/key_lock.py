"""The per-key build lock: one builder per key across processes and threads, freed when it dies.

A POSIX record lock (fcntl F_SETLK over the whole lock file), not flock. An flock belongs to the
open file description, so every process holding a copy of the descriptor holds the lock: a child
between fork and exec (Python's subprocess forks, or vforks, then closes descriptors and execs
zig) keeps a killed builder's lock until it reaches exec, which on a loaded machine is long
enough for the next process to find the key locked. A record lock belongs to the process: a
forked child's copy of the descriptor holds nothing, and the kernel frees the lock when its
process dies, whatever its children still have open.

Record locks are per process, not per thread, and closing any descriptor of the file drops the
process's lock. So within a process a threading lock per file comes first, and only the thread
holding it opens the file; a forked child starts with no locks held (it holds no record locks).
"""
from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

POLL = 0.05          # seconds between tries while waiting with a timeout
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class LockTimeout(TimeoutError):
    """The lock is held by another process or thread and the timeout passed."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the lock {path} is held by another build")
        self.path = path


_registry_lock = threading.Lock()
_in_process: dict[str, threading.Lock] = {}


def _reset_after_fork() -> None:
    global _registry_lock, _in_process
    _registry_lock, _in_process = threading.Lock(), {}


os.register_at_fork(after_in_child=_reset_after_fork)


def _thread_lock(path: Path) -> threading.Lock:
    with _registry_lock:
        return _in_process.setdefault(str(path), threading.Lock())


def _record_lock(fd: int, deadline: float | None) -> bool:
    """Take the write lock on the whole file: waiting for ever (deadline None) or until `deadline`."""
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX if deadline is None else fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno == errno.EDEADLK:     # two processes' threads crossing keys: not a real deadlock
                time.sleep(POLL)
                continue
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


@contextmanager
def hold(path: Path, timeout: float = -1) -> Iterator[None]:
    """Hold the lock of `path` (created if missing) for the block; timeout < 0 waits for ever,
    0 tries once; LockTimeout when it is not had in time."""
    deadline = None if timeout < 0 else time.monotonic() + timeout
    in_process = _thread_lock(path)
    if not in_process.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
        raise LockTimeout(path)
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o600)
        try:
            if not _record_lock(fd, deadline):
                raise LockTimeout(path)
            yield
        finally:
            os.close(fd)     # closing the descriptor drops the record lock
    finally:
        in_process.release()
