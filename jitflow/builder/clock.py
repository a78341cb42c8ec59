"""What a build cost: BuildInfo (exe.build_info) and the clock that times each stage into it."""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .progress import Progress

log = logging.getLogger("jitflow")


@dataclass
class BuildInfo:
    """How a library was obtained and what each stage cost, in seconds."""

    key: str
    outcome: str                       # "hit" (disk cache), "shared" (shared tier), "built", or "memory"
    stages: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    library: Path | None = None

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in self.stages.items())
        return f"{self.outcome} {self.key[:12]} in {self.total * 1000:.1f} ms" + (f" ({parts})" if parts else "")


class Clock:
    """Times the stages of a build into `stages` and shows them as progress."""

    def __init__(self, stages: dict[str, float], progress: Progress | None = None) -> None:
        self.stages = stages
        self.progress = progress

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
        """Say on the progress line what the build is doing now."""
        log.debug("jitflow: %s ...", what)
        if self.progress:
            self.progress.set(what)
