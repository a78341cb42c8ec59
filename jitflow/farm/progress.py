"""A sweep's progress on a terminal, in the build progress line's style (builder/progress.py):

    jitflow: building 128 executables on Ray | 37/128: 30 built, 5 hit, 2 failed, 12.3/s | 3.0 s
"""
from __future__ import annotations

import threading
import time
from typing import Any, TextIO

from ..builder.progress import Progress


class SweepProgress:
    """Counts what build_all finished (built, hit, failed) and shows it with the rate."""

    def __init__(self, total: int, where: str, mode: str = "auto", stream: TextIO | None = None,
                 delay: float | None = None) -> None:
        self.total = total
        self.counts = {"built": 0, "hit": 0, "failed": 0}
        self.start = time.perf_counter()
        self._lock = threading.Lock()
        extra = {} if delay is None else {"delay": delay}
        self._line = Progress(f"{total} executables {where}", stream=stream, mode=mode, **extra)
        self._line.set(self.text())

    def done(self, result: Any) -> None:
        """One item finished: a BuildResult (its outcome counts; "shared" counts as a hit)."""
        with self._lock:
            name = "failed" if not result.ok else "built" if result.outcome == "built" else "hit"
            self.counts[name] += 1
            self._line.set(self.text())

    def text(self) -> str:
        finished = sum(self.counts.values())
        rate = finished / max(time.perf_counter() - self.start, 1e-9)
        c = self.counts
        return (f"{finished}/{self.total}: {c['built']} built, {c['hit']} hit, {c['failed']} failed, "
                f"{rate:.1f}/s")

    def close(self) -> None:
        self._line.close("done: " + self.text())
