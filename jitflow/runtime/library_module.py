"""The module a loaded library is: TVM's runtime module, whose `lib[name]` for a function the library
does not have is a FunctionNotFoundError that lists the functions it has, as `exe[name]` is, and
whose `inspect_source()` is the library's host C, as TVM's C-built module's is.

tvm_ffi's Module raises a bare AttributeError there, and a loaded library's inspect_source() is ''.
The loaded object keeps its class's every method and stays an instance of it (tvm_ffi's Module, or
TVM's `tvm.runtime.Module` where `tvm` is imported): it is made of a subclass that only adds the
message and the source, and takes over the loaded handle.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from pathlib import Path

from ..errors import FunctionNotFoundError, InvalidInputError
from ..formats import VM_KIND

_classes: dict[type, type] = {}
_classes_lock = threading.Lock()
#: the attribute holding what names the library's functions (in the module's own __dict__)
_NAMES = "_jitflow_functions"
#: the attribute holding the path of the library's host C, where a cache entry keeps it
_HOST_C = "_jitflow_host_c"
#: the formats TVM's C-built module answers inspect_source() with its C
_C_FORMATS = ("", "c")


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

            def inspect_source(self: Any, fmt: str = "") -> str:
                text = base.inspect_source(self, fmt)
                if text or fmt not in _C_FORMATS:
                    return text
                return _host_c(self.__dict__.get(_HOST_C))

            cls = type("LoadedLibrary", (base,), {"__slots__": (), "__getitem__": __getitem__,
                                                  "inspect_source": inspect_source, "__module__": __name__,
                                                  "__doc__": f"A loaded library: {base.__qualname__} whose "
                                                             "lib[name] lists the functions it has and whose "
                                                             "inspect_source() is its host C."})
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


def keep_host_c(module: Any, path: Path) -> None:
    """Have `module` (one named_module made) answer inspect_source() with the host C at `path`, read
    when asked: the build's kept source (src/host.c of its cache entry)."""
    module.__dict__[_HOST_C] = path


def _host_c(path: Path | None) -> str:
    """The host C at `path`; where there is none, an InvalidInputError that says where it is."""
    if path is None:
        raise InvalidInputError("this library was loaded from a file, which does not carry its host C: "
                                "exe.inspect().host_c (or `jitflow inspect` with its cache key) shows the C of "
                                "a build")
    try:
        return path.read_text()
    except OSError:
        raise InvalidInputError(f"the host C of this library is no longer at {path} (a build with caching off is "
                                "removed once loaded, a cache entry when pruned): exe.inspect().host_c shows it "
                                "again") from None
