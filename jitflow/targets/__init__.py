"""What a library is built for: the target kind and CUDA archs (spec.py, archs.py) and the CPU
and OS of its host code (hosts.py).

The names below are imported from their modules on first use: the load path needs only a few of
them (compat.py's arch numbers), and `import jitflow` stays light."""
from __future__ import annotations

from typing import Any

_WHERE = {"arch_number": "archs", "normalize_arch": "archs", "visible_gpu_arch": "archs",
          "DEFAULT_HOST": "hosts", "SUPPORTED_HOSTS": "hosts", "machine_host": "hosts",
          "TargetSpec": "spec", "resolve_target": "spec"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
