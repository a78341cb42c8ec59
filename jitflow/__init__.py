"""jitflow: TVM IRModules to fast, cached, shippable shared libraries.

    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    exe.jit()["main"](a, b, c)
    exe.export_library("kernel.so"); jitflow.load("kernel.so")
    jitflow.compile(relax_mod, "c").vm("cpu")["main"](x)        # Relax models: a VirtualMachine
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import errors
from .errors import JitflowError
from .executable import Executable, compile, load
from .vm import load_vm
from .parallel import BuildResult, build_all
from .logs import configure_from_env as _configure_logging

_configure_logging()

__all__ = ["BuildResult", "Executable", "JitflowError", "build_all", "compile", "errors", "load", "load_vm", "__version__"]
