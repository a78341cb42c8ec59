"""Build progress on a terminal: one status line for builds that take more than a moment."""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

#: builds shorter than this print nothing.
DELAY_SECONDS = 1.5


def enabled(stream: TextIO, mode: str = "auto") -> bool:
    """mode 'on' forces progress, 'off' silences it; 'auto' shows it on terminals only (JITFLOW_PROGRESS)."""
    if mode in ("on", "off"):
        return mode == "on"
    return bool(getattr(stream, "isatty", lambda: False)())


class Progress:
    """Shows `jitflow: building <what> | <stage> | <seconds>` after DELAY_SECONDS, updated in place."""

    def __init__(self, what: str, stream: TextIO | None = None, delay: float = DELAY_SECONDS,
                 mode: str = "auto") -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.delay = delay
        self.stage = "starting"
        self.said: list[str] = []           # every stage set, in order (what a slow build told the user)
        self.done: list[str] = []
        self.start = time.perf_counter()
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if enabled(self.stream, mode):
            self._thread = threading.Thread(target=self._run, name="jitflow-progress", daemon=True)
            self._thread.start()

    def set(self, stage: str) -> None:
        """What the build is doing now (shown from the next refresh of the line)."""
        self.stage = stage
        if not self.said or self.said[-1] != stage:
            self.said.append(stage)

    def finished(self, item: str) -> None:
        self.done.append(item)

    def _line(self) -> str:
        done = f" | done: {', '.join(self.done)}" if self.done else ""
        return f"jitflow: building {self.what} | {self.stage}{done} | {time.perf_counter() - self.start:.1f} s"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            self.stream.write("\r\x1b[2K" + self._line())
            self.stream.flush()
            self.shown = True
            self._stop.wait(0.25)

    def close(self, outcome: str = "done") -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            self.stage = outcome
            self.stream.write("\r\x1b[2K" + self._line() + "\n")
            self.stream.flush()
