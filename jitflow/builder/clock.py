"""The clock that times each stage of a build into its stages (the pipeline's BuildInfo.stages)."""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .progress import Progress

log = logging.getLogger("jitflow")


class Clock:
    """Times the stages of a build into `stages` and shows them as progress."""

    def __init__(self, stages: dict[str, float], progress: Progress | None = None) -> None:
        self.stages = stages
        self.progress = progress
        self._shown: str | None = None    # what show() said last: said again, it is not logged again
        self._shown_lock = threading.Lock()   # the host C's compile threads show their progress too

    @contextmanager
    def stage(self, name: str, doing: str | None = None) -> Iterator[None]:
        """Time stage `name`; the progress line says `doing` (or the name) meanwhile."""
        start = time.perf_counter()
        log.debug("jitflow: %s ...", name)
        if self.progress:
            self.progress.set(doing or name)
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Count `seconds` to stage `name` (stages that run beside others are timed by their caller)."""
        self.stages[name] = self.stages.get(name, 0.0) + seconds
        log.info("jitflow: %s took %.0f ms", name, self.stages[name] * 1000)

    def finished(self, item: str) -> None:
        """One part of a stage is done (a device arch): the progress line lists it."""
        if self.progress:
            self.progress.finished(item)

    def show(self, what: str) -> None:
        """Say on the progress line what the build is doing now (logged at debug level once per change)."""
        with self._shown_lock:
            said, self._shown = what == self._shown, what
        if not said:
            log.debug("jitflow: %s ...", what)
        if self.progress:
            self.progress.set(what)
