"""jitflow: TVM IRModules to fast, cached, shippable shared libraries.

    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    exe.jit()["main"](a, b, c)
    exe.export_library("kernel.so"); jitflow.load("kernel.so")
    jitflow.compile(relax_mod, "c").vm("cpu")["main"](x)        # Relax models: a VirtualMachine
    jitflow.load_entry("vecadd"); jitflow.load_vm_entry("mlp")  # an unpacked cache's entries, by label

The public API is what this module exports, `jitflow.errors`, the report types in
`jitflow.report`, the trace types in `jitflow.tracing`, `jitflow.meta_schedule`, the bundles'
`jitflow.cache.pack` and `jitflow.cache.unpack`, and what checks a library against another machine:
`jitflow.runtime.compat.SimulatedGpu` and `check_library`, and `jitflow.runtime.cpu_features.simulated`;
every other module is internal and may change. The packages among them are imported on first use
(`jitflow.report.Report` after a plain `import jitflow`), so that a process that only loads
libraries, or gets cache hits, imports none of them.
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


#: the public packages, imported on first use: jitflow.report.Report, jitflow.cache.pack, jitflow.meta_schedule
#: (TVM's MetaSchedule), ... after a plain `import jitflow`
_PACKAGES = ("cache", "meta_schedule", "report", "tracing")


def __getattr__(name: str) -> Any:
    if name in _PACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        import importlib

        where, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{where}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jitflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_PACKAGES))
