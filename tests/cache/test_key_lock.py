"""The per-key build lock: exclusive across processes and threads, and freed the moment its holder
dies, even while a child forked from it (not yet exec'd) still has a copy of its descriptor."""
from __future__ import annotations

import os
import signal
import threading
import time

import lock_holders
import pytest

from jitflow.cache.store.key_lock import LockTimeout, hold


def _free(path) -> bool:
    try:
        with hold(path, timeout=0):
            return True
    except LockTimeout:
        return False


def test_a_killed_holders_lock_is_free_while_its_forked_child_keeps_the_descriptor(tmp_path):
    path = tmp_path / "k.lock"
    ready_r, ready_w = os.pipe()
    holder = os.fork()
    if holder == 0:    # takes the lock, then forks a child that keeps every descriptor and never execs
        try:
            os.close(ready_r)
            with hold(path):
                child = os.fork()
                if child == 0:
                    os.close(ready_w)
                    time.sleep(30)
                    os._exit(0)
                os.write(ready_w, str(child).encode())
                time.sleep(30)
        finally:
            os._exit(0)
    os.close(ready_w)
    child = int(os.read(ready_r, 32))
    os.close(ready_r)
    try:
        assert not _free(path), "the lock is not exclusive across processes"
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        assert any(f"pid {child} " in line for line in lock_holders.describe(path).split("; ")), \
            "the child should still have the lock file open"
        assert _free(path), f"the dead holder's lock is still held: {lock_holders.describe(path)}"
    finally:
        os.kill(child, signal.SIGKILL)


def test_threads_of_one_process_take_turns_and_a_timeout_says_so(tmp_path):
    path, inside, overlaps = tmp_path / "k.lock", [], []

    def work() -> None:
        for _ in range(20):
            with hold(path):
                inside.append(1)
                overlaps.append(len(inside))
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(overlaps) == 1 and len(overlaps) == 80
    with hold(path):
        done = []
        other = threading.Thread(target=lambda: done.append(_free(path)))
        other.start()
        other.join()
        assert done == [False]
        with pytest.raises(LockTimeout, match="held by another build"):
            with hold(path, timeout=0.1):
                pass
    assert _free(path)
