"""Where the caller compiled a module: the file and line of the first frame outside jitflow.

It is kept with the cache entry (meta.json, never the key), so that `jitflow cache ls`, the record
and a read-only miss tell apart entries that share a label: a module compiled without `name=` is
labelled by its functions, and most kernels have one function, `main`. A module the command line
builds (FILE.py:NAME) has no caller of its own: its label names the file already.
"""
from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CLI = os.path.join(_PACKAGE, "cli") + os.sep
#: frames of the import system (a module file that compiles at import time is found behind them)
_IMPORT_FRAMES = ("<frozen importlib.", "<frozen runpy>")


def caller_origin(depth: int = 1) -> str | None:
    """'FILE:LINE' of the first frame outside jitflow above the caller (`depth` frames up), or None
    when there is none or jitflow's command line made the call."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    while frame is not None:
        file = frame.f_code.co_filename
        if file.startswith(_CLI):
            return None
        if not file.startswith(_PACKAGE + os.sep) and not file.startswith(_IMPORT_FRAMES):
            return f"{file}:{frame.f_lineno}"
        frame = frame.f_back
    return None
