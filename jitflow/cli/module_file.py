"""Load what a command names as FILE.py:NAME: an IRModule, a PrimFunc, a jitflow Executable, or a
function that takes no arguments and returns one of those."""
from __future__ import annotations

import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

_PACKAGE = str(Path(__file__).resolve().parents[1])
WANTED = "an IRModule, a PrimFunc, a jitflow Executable, or a function without arguments returning one"


def _buildable(obj: Any) -> bool:
    import tvm

    from ..executable import Executable

    return isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc, Executable))


def _user_error(spec: str, what: str, exc: BaseException) -> InvalidInputError:
    """An error raised by the user's own code, with the part of the traceback that is theirs."""
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not f.filename.startswith((_PACKAGE, "<frozen"))]
    where = "".join(traceback.format_list(theirs[-5:])).rstrip()
    return InvalidInputError(f"{spec}: {what} raised {type(exc).__name__}: {exc}" + (f"\n{where}" if where else ""))


def _import(spec: str, path: Path) -> Any:
    mod_name = f"_jitflow_user_{abs(hash(str(path.absolute())))}"
    loader_spec = importlib.util.spec_from_file_location(mod_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise InvalidInputError(f"{spec}: cannot import {path} (is it a Python file?)")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.parent.absolute()))
    try:
        loader_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise _user_error(spec, f"importing {path.name}", exc) from None
    finally:
        sys.path.remove(str(path.parent.absolute()))
    return module


def _call(spec: str, name: str, func: Any) -> Any:
    """Call a module-building function, unless its signature says it is not one."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        required = [p.name for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if required:
            raise InvalidInputError(f"{spec}: {name}() needs arguments ({', '.join(required)}); name {WANTED}")
        if sig.return_annotation in (None, "None"):
            raise InvalidInputError(f"{spec}: {name}() returns None (so it was not called); name {WANTED}")
    try:
        result = func()
    except Exception as exc:
        raise _user_error(spec, f"calling {name}()", exc) from None
    if not _buildable(result):
        raise InvalidInputError(f"{spec}: {name}() returned {type(result).__name__}; name {WANTED}")
    return result


def load_module_spec(spec: str) -> Any:
    """'model.py:Module' -> the object named Module in model.py (called if it is such a function)."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise InvalidInputError(f"{spec}: expected FILE.py:NAME, for example model.py:Module")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"{spec}: no such file {path}")
    module = _import(spec, path)
    if not hasattr(module, name):
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        raise InvalidInputError(f"{spec}: {path.name} has no {name!r}; it defines {', '.join(names)}")
    obj = getattr(module, name)
    if _buildable(obj):
        return obj
    if callable(obj):
        return _call(spec, name, obj)
    raise InvalidInputError(f"{spec}: {name} is of type {type(obj).__name__}; name {WANTED}")
