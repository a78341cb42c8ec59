"""TVM's host C code generator, wrapped while jitflow lowers: legalize the IR first, name what fails.

TVM looks `target.build.c` up each time it prints a host module (for kernels, for the host side
of CUDA modules and for Relax VM executables alike), so replacing it for the duration of one
`tvm.compile` puts legalize.py, outline.py and parallel.py right before printing, on the IR TVM
finished lowering.
"""
from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ...errors import HostCodeError
from ...formats.compute_functions import entry_of
from .legalize import function_name, legalize_module
from .outline import outline_module
from .parallel import parallelize_module
from .unroll import unroll_module

_BUILD_C = "target.build.c"
_LOCK = threading.Lock()
_UNRESOLVED_RE = re.compile(r'Unresolved call .*?name="([^"]+)"')
_NO_C_TYPE_RE = re.compile(r"Cannot convert type (\S+) to C type")


def _construct(message: str) -> str:
    """What TVM's C printer could not print, from its error message."""
    found = _UNRESOLVED_RE.search(message)
    if found:
        return f"the intrinsic {found.group(1)} (TVM has no C lowering for it)"
    found = _NO_C_TYPE_RE.search(message)
    if found:
        return f"values of type {found.group(1)} (C has no type for them)"
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "an unknown construct"


def explain_failure(error: Exception, mod: Any, target: Any, build: Callable[[Any, Any], Any]) -> HostCodeError:
    """A HostCodeError for a failed print of `mod`: the construct, and the functions that fail alone."""
    import tvm

    message = str(error)
    construct = _construct(message)
    failing = []
    functions = [(g, f) for g, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    for gvar, func in functions:
        try:
            build(tvm.IRModule({gvar: func}, attrs=mod.attrs), target)
        except Exception as alone:  # noqa: BLE001 - any failure of this function on its own
            if _construct(str(alone)) == construct:
                failing.append(_tir_function(gvar, func))
    if not failing and len(functions) == 1:
        failing = [_tir_function(*functions[0])]
    return HostCodeError(construct, list(dict.fromkeys(failing)), tool="TVM's C code generator", command=_BUILD_C,
                         log=message)


def _tir_function(gvar: Any, func: Any) -> str:
    """The TIR function a printed function is (or is the compute part of: outline.py)."""
    name = function_name(gvar, func)
    return entry_of(name) or name


@dataclass
class Printed:
    """What the wrapped printer did that the C text does not say: the compute functions and parallel
    bodies whose buffers do not alias (outline.py, parallel.py), for outline_c.py to make `restrict`."""

    restrict: set[str] = field(default_factory=set)


@contextmanager
def legalized_c_host(every_function: bool = False) -> Iterator[Printed]:
    """While active, TVM's C host modules are legalized before printing, their functions' work
    outlined (outline.py; `every_function`: not only where no aliasing is promised) and their
    parallel loops launched on TVM's thread pool (parallel.py); a failure is a HostCodeError."""
    import tvm_ffi

    original = tvm_ffi.get_global_func(_BUILD_C)
    failures: list[HostCodeError] = []
    printed = Printed()

    def build(mod: Any, target: Any) -> Any:
        try:
            legal, restrict = outline_module(legalize_module(unroll_module(mod)), every_function)
            legal, bodies = parallelize_module(legal, restrict)
            printed.restrict |= restrict | bodies
        except HostCodeError as exc:
            failures.append(exc)
            raise
        try:
            return original(legal, target)
        except Exception as exc:
            failures.append(explain_failure(exc, legal, target, original))
            raise

    with _LOCK:
        tvm_ffi.register_global_func(_BUILD_C, build, override=True)
        try:
            yield printed
        except Exception:
            if failures:    # the error crossed TVM's FFI as a plain RuntimeError: raise ours instead
                raise failures[0] from None
            raise
        finally:
            tvm_ffi.register_global_func(_BUILD_C, original, override=True)
