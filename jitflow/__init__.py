"""jitflow: TVM IRModules to fast, cached, shippable shared libraries.

    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    exe.jit()["main"](a, b, c)
    exe.export_library("kernel.so"); jitflow.load("kernel.so")
    jitflow.compile(relax_mod, "c").vm("cpu")["main"](x)        # Relax models: a VirtualMachine

The public API is what this module exports, `jitflow.errors`, the report types in
`jitflow.report` and the trace types in `jitflow.tracing`; every other module is internal and may change.
"""
from __future__ import annotations

from . import errors
from ._version import __version__
from .builder.clock import BuildInfo
from .config import log_level as _log_level
from .errors import JitflowError
from .executable import Executable, compile, load
from .farm import BuildResult, build_all
from .logs import configure as _configure_logging
from .runtime.vm import load_vm

_configure_logging(_log_level())

__all__ = ["BuildInfo", "BuildResult", "Executable", "JitflowError", "build_all", "compile", "errors", "load",
           "load_vm", "trace", "__version__"]


def __getattr__(name: str) -> object:
    # jitflow.trace (jitflow.tracing.trace), imported on first use to keep `import jitflow` light
    if name == "trace":
        from .tracing import trace

        return trace
    raise AttributeError(f"module 'jitflow' has no attribute {name!r}")
