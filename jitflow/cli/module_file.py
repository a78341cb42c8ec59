"""Load the module a command names as FILE.py:NAME (an IRModule, a PrimFunc, or a function returning one)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError


def load_module_spec(spec: str) -> Any:
    """'model.py:Module' -> the object named Module in model.py (called if it is a plain function)."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise InvalidInputError(f"{spec!r}: expected FILE.py:NAME, for example model.py:Module")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"{spec!r}: no such file {path}")
    mod_name = f"_jitflow_user_{abs(hash(str(path.absolute())))}"
    loader_spec = importlib.util.spec_from_file_location(mod_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise InvalidInputError(f"{spec!r}: cannot import {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.parent.absolute()))
    try:
        loader_spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent.absolute()))
    if not hasattr(module, name):
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        raise InvalidInputError(f"{spec!r}: {path.name} has no {name!r}; it defines {', '.join(names)}")
    obj = getattr(module, name)
    import tvm

    from ..executable import Executable

    if not isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc, Executable)) and callable(obj):  # an Executable stays
        obj = obj()
    return obj
