"""The module a loaded library is: TVM's runtime module, whose `lib[name]` for a function the library
does not have is a FunctionNotFoundError that lists the functions it has, as `exe[name]` is.

tvm_ffi's Module raises a bare AttributeError there. The loaded object keeps its class's every
method and stays an instance of it (tvm_ffi's Module, or TVM's `tvm.runtime.Module` where `tvm` is
imported): it is made of a subclass that only adds the message, and takes over the loaded handle.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from ..errors import FunctionNotFoundError
from ..formats import VM_KIND

_classes: dict[type, type] = {}
_classes_lock = threading.Lock()
#: the attribute holding what names the library's functions (in the module's own __dict__)
_NAMES = "_jitflow_functions"


def _named(base: type) -> type:
    """The subclass of `base` whose lookups by name say which functions there are."""
    with _classes_lock:
        if base in _classes.values():          # already one of ours
            return base
        cls = _classes.get(base)
        if cls is None:
            def __getitem__(self: Any, name: str) -> Any:
                try:
                    return base.__getitem__(self, name)
                except AttributeError:
                    if self.kind == VM_KIND:
                        raise FunctionNotFoundError(
                            name, [], note="this library is a Relax model: its functions are called through a "
                            "VirtualMachine, exe.vm(device)[name] or jitflow.load_vm(path, device)[name]") from None
                    functions = self.__dict__.get(_NAMES)
                    raise FunctionNotFoundError(name, functions() if functions is not None else ()) from None

            cls = type("LoadedLibrary", (base,), {"__slots__": (), "__getitem__": __getitem__, "__module__": __name__,
                                                  "__doc__": f"A loaded library: {base.__qualname__} whose "
                                                             "lib[name] lists the functions it has."})
            _classes[base] = cls
    return cls


def named_module(module: Any, functions: Callable[[], Sequence[str]]) -> Any:
    """`module` (a freshly loaded tvm_ffi Module) as one whose lib[name] names `functions()` (asked
    only then) when it has no function `name`; `module` itself is left empty (its handle moves to
    the result)."""
    cls = _named(type(module))
    out = cls.__new__(cls)
    out.__move_handle_from__(module)
    out.__dict__[_NAMES] = functions
    return out
