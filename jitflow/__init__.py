"""jitflow: TVM IRModules to fast, cached, shippable shared libraries.

    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    exe.jit()["main"](a, b, c)
    exe.export_library("kernel.so"); jitflow.load("kernel.so")
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import errors
from .errors import JitflowError
from .executable import Executable, compile, load
from .logs import configure_from_env as _configure_logging

_configure_logging()

__all__ = ["Executable", "JitflowError", "compile", "errors", "load", "__version__"]
