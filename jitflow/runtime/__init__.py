"""Running what was built, with tvm_ffi and TVM's runtime libraries alone (tvm_runtime.py finds and
loads them; the `tvm` package is never imported): load a library (load.py) after checking the file,
its digest included (library_check.py), through the descriptor it is loaded from (library_file.py),
and a Relax VM over it (vm.py, virtual_machine.py) whose results have `.numpy()` (tensors.py)."""
from __future__ import annotations

from typing import Any

_SUBMODULES = ("compat", "library_check", "library_file", "load", "tensors", "tvm_runtime", "virtual_machine", "vm")


def __getattr__(name: str) -> Any:
    # jitflow.runtime.compat.SimulatedGpu and the like, imported on first use (import jitflow stays light)
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
