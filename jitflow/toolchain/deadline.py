"""A build's time limit (build_all's and Executable.build's `timeout_s`), as the compilers see it: a
process waited for past it is killed, and the build fails with BuildTimeoutError."""
from __future__ import annotations

import time
from typing import NamedTuple, Sequence

from ..errors import BuildTimeoutError


class Deadline(NamedTuple):
    """When a build must be done (time.monotonic()), and the limit it was given, in seconds."""

    at: float
    limit: float

    @classmethod
    def after(cls, seconds: float | None) -> Deadline | None:
        """The deadline `seconds` from now; None (no limit) for None."""
        return None if seconds is None else cls(time.monotonic() + seconds, float(seconds))

    def left(self) -> float:
        """Seconds left (0 once it has passed)."""
        return max(0.0, self.at - time.monotonic())

    def check(self, step: str, what: Sequence[str] | str = "") -> None:
        """Raise BuildTimeoutError naming `step` if the deadline has passed (after a step that cannot be
        interrupted, such as lowering in this process)."""
        if time.monotonic() >= self.at:
            raise BuildTimeoutError(step, what or step, "(it runs in this process and cannot be interrupted)", None,
                                    self.limit, killed=False)
