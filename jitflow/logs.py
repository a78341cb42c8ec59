"""The 'jitflow' logger: a stderr handler at the level JITFLOW_LOG asks for, and warnings said once."""
from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("jitflow")
_said: set[str] = set()
_said_lock = threading.Lock()


def configure(level: int | None) -> None:
    """Attach a stderr handler at `level`; None leaves logging to the application."""
    if level is None:
        return
    log.setLevel(level)
    if not any(getattr(h, "_jitflow", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler._jitflow = True  # type: ignore[attr-defined]
        log.addHandler(handler)


def warn_once(topic: str, message: str, *args: Any) -> None:
    """Log `message` as a warning the first time `topic` comes up in this process, at info level after."""
    with _said_lock:
        first = topic not in _said
        _said.add(topic)
    log.log(logging.WARNING if first else logging.INFO, message, *args)


def already_said(topic: str) -> None:
    """Count `topic` as warned about: its warning comes at info level only (where the caller cannot act on it)."""
    with _said_lock:
        _said.add(topic)


def forget_warnings() -> None:
    """Warn again about every topic (for a long-lived process whose setup changed)."""
    with _said_lock:
        _said.clear()
