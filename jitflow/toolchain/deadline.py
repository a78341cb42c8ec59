"""A build's time limit (build_all's and Executable.build's `timeout_s`), as the compilers see it: a
process waited for past it is killed, and the build fails with BuildTimeoutError.

The limit covers the build's own work. Time it spends waiting for other builds' work (build_all's
batches: the other members' lowering, the files ahead of its own in a shared compiler process) is
not charged: the build pauses its deadline for the wait (paused()) and is charged afterwards for
its own part of it (charge())."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, Sequence

from ..errors import BuildTimeoutError


class Deadline:
    """When a build must be done (time.monotonic()), and the limit it was given, in seconds."""

    def __init__(self, at: float, limit: float) -> None:
        self.at = at
        self.limit = limit
        self._paused_at: float | None = None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline | None:
        """The deadline `seconds` from now; None (no limit) for None."""
        return None if seconds is None else cls(time.monotonic() + seconds, float(seconds))

    def left(self) -> float:
        """Seconds left (0 once it has passed); while paused, what was left when the pause began."""
        now = self._paused_at if self._paused_at is not None else time.monotonic()
        return max(0.0, self.at - now)

    @contextmanager
    def paused(self) -> Iterator[Deadline]:
        """Time spent inside is not charged (the build waits for other builds' work)."""
        start = time.monotonic()
        self._paused_at = start
        try:
            yield self
        finally:
            self._paused_at = None
            self.at += time.monotonic() - start

    def charge(self, seconds: float) -> None:
        """Charge `seconds` of the build's own work done during a pause (its file in a shared compiler)."""
        self.at -= max(0.0, seconds)

    def check(self, step: str, what: Sequence[str] | str = "") -> None:
        """Raise BuildTimeoutError naming `step` if the deadline has passed (after a step that cannot be
        interrupted, such as lowering in this process)."""
        if self.left() <= 0:
            raise BuildTimeoutError(step, what or step, "(it runs in this process and cannot be interrupted)", None,
                                    self.limit, killed=False)
