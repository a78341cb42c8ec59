"""Builds that meet to compile their host C in one compiler process (cc1_batch.py).

A batch has a member per build, each run in a thread of its own (farm/batch.py). A member's
first host compile (a source compiled as one piece, with no flags of its own) waits for the
others; once every member has either asked or said it will not (its source is in pieces, it was
a cache hit, it failed), the files are compiled together and each member goes on with its object.
The wait is not charged to the member's time limit (deadline.py): only its own file's compile is.
Everything else, and a file the shared process gives back, compiles as it would alone.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterator, Sequence

from . import cc1_batch
from ..deadline import Deadline

_here = threading.local()


class Batch:
    """`size` members; `settled(member)` is told each time one has asked or declined."""

    def __init__(self, size: int, settled: Callable[[Member], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._open = size
        self._asked: list[tuple[cc1_batch.Request, threading.Event]] = []
        self._settled = settled
        self.members = [Member(self, n) for n in range(size)]

    def _settle(self, member: Member, asked: tuple[cc1_batch.Request, threading.Event] | None) -> None:
        with self._lock:
            self._open -= 1
            if asked is not None:
                self._asked.append(asked)
            ready = self._asked if self._open == 0 else None
        if self._settled is not None:
            self._settled(member)
        if ready:
            threading.Thread(target=self._compile, args=(ready,), name="jitflow-batch", daemon=True).start()

    @staticmethod
    def _compile(asked: list[tuple[cc1_batch.Request, threading.Event]]) -> None:
        events = {id(r): event for r, event in asked}
        try:        # each member goes on as soon as its own outcome is known
            cc1_batch.compile_all([r for r, _ in asked], lambda r: events[id(r)].set())
        finally:
            for r, event in asked:
                r.outcome = r.outcome or cc1_batch.ALONE
                event.set()


class Member:
    """One build's place in a batch: it asks once (compile) or declines."""

    def __init__(self, batch: Batch, index: int) -> None:
        self.batch, self.index = batch, index
        self.open = True
        self.request: cc1_batch.Request | None = None
        self._lock = threading.Lock()

    def _close(self) -> bool:
        with self._lock:
            was, self.open = self.open, False
        return was

    def decline(self) -> None:
        """This build will not ask (nothing happens if it has asked or declined already)."""
        if self._close():
            self.batch._settle(self, None)

    def compile(self, source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
                cpu: str | None, deadline: Deadline | None) -> str:
        """Compile `source` into `out` with the batch; returns cc1_batch.BUILT, TIMED_OUT (raise
        cc1_batch.timeout_error(member.request)) or ALONE (compile it alone, as zig.py would)."""
        if not self.open:
            return cc1_batch.ALONE
        r = cc1_batch.request(source, out, include_dirs, host, zig_cache, cpu, deadline)
        if r is None or not self._close():
            self.decline()
            return cc1_batch.ALONE
        self.request = r
        event = threading.Event()
        with deadline.paused() if deadline is not None else nullcontext():   # the others' work is not ours
            self.batch._settle(self, (r, event))
            event.wait()
        if deadline is not None:
            deadline.charge(r.own_s)
        return r.outcome


def current() -> Member | None:
    """The batch member this thread builds for, or None (a build of its own)."""
    return getattr(_here, "member", None)


@contextmanager
def joined(member: Member) -> Iterator[Member]:
    """Builds in this thread are `member`'s; on leaving, a member that has not asked declines."""
    _here.member = member
    try:
        yield member
    finally:
        _here.member = None
        member.decline()
