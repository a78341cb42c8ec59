"""jitflow: TVM IRModules to fast, cached, shippable shared libraries.

    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    exe.jit()["main"](a, b, c)
    exe.export_library("kernel.so"); jitflow.load("kernel.so")
    jitflow.compile(relax_mod, "c").vm("cpu")["main"](x)        # Relax models: a VirtualMachine
    jitflow.load_entry("vecadd"); jitflow.load_vm_entry("mlp")  # an unpacked cache's entries, by label

The public API is what this module exports, `jitflow.errors`, the report types in
`jitflow.report`, the trace types in `jitflow.tracing`, `jitflow.meta_schedule`, and what checks a
library against another machine: `jitflow.runtime.compat.SimulatedGpu` and `check_library`, and
`jitflow.runtime.cpu_features.simulated`; every other module is internal and may change.
"""
from __future__ import annotations

from typing import Any

from . import errors
from ._version import __version__
from .config import log_level as _log_level
from .errors import JitflowError
from .logs import configure as _configure_logging
from .runtime.load import load

_configure_logging(_log_level())

__all__ = ["BuildInfo", "BuildResult", "Executable", "JitflowError", "build_all", "compile", "errors", "load",
           "load_entry", "load_vm", "load_vm_entry", "trace", "visible_gpu_arch", "__version__"]

#: imported on first use, so that `import jitflow` in a process that only loads libraries costs what
#: loading needs (the build side brings TVM's compiler with it when it builds)
_LAZY = {"BuildInfo": ("pipeline", "BuildInfo"), "BuildResult": ("farm", "BuildResult"),
         "build_all": ("farm", "build_all"), "Executable": ("executable", "Executable"),
         "compile": ("executable", "compile"), "load_vm": ("runtime.vm", "load_vm"), "trace": ("tracing", "trace"),
         "load_entry": ("cache.named_entry", "load_entry"), "load_vm_entry": ("cache.named_entry", "load_vm_entry"),
         "visible_gpu_arch": ("targets", "visible_gpu_arch")}


def __getattr__(name: str) -> Any:
    if name == "meta_schedule":        # jitflow.meta_schedule.Builder: TVM's MetaSchedule, imported when used
        import importlib

        return importlib.import_module(f"{__name__}.meta_schedule")
    if name in _LAZY:
        import importlib

        where, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{where}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jitflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
