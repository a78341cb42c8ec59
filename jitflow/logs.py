"""The 'jitflow' logger, set up from JITFLOW_LOG when the user asks for it."""
from __future__ import annotations

import logging
import os

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_from_env() -> None:
    """Attach a stderr handler at JITFLOW_LOG's level; without it, logging is left to the application."""
    raw = os.environ.get("JITFLOW_LOG", "").strip().lower()
    if not raw:
        return
    logger = logging.getLogger("jitflow")
    logger.setLevel(LEVELS.get(raw, logging.INFO))
    if not any(getattr(h, "_jitflow", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler._jitflow = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
