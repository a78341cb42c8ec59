"""Load a built library with the TVM runtime, in a full TVM install or a runtime-only one, after
checking the file (library_check.py) through the descriptor it is loaded from (library_file.py)."""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import LoadError
from . import library_check
from .library_file import LibraryFile

_LOCK = threading.Lock()


#: how the blob spells a module of kind "cuda": its u64 length, then the name
_CUDA_KIND = (4).to_bytes(8, "little") + b"cuda"
#: the prefix of the packed functions (contrib sort, topk, random) that TVM keeps in libtvm_runtime_extra
_CONTRIB = b"tvm.contrib."


def _holds(source: str | os.PathLike | int, marker: bytes) -> bool:
    """Whether the file (a path or an open descriptor) holds the bytes `marker`: a search, far
    cheaper than reading the ELF."""
    import mmap

    if isinstance(source, int):
        return _fd_holds(source, marker, mmap)
    with open(source, "rb") as f:
        return _fd_holds(f.fileno(), marker, mmap)


def _fd_holds(fd: int, marker: bytes, mmap: Any) -> bool:
    try:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            return data.find(marker) >= 0
    except ValueError:  # an empty file
        return False


def needs_cuda(source: str | os.PathLike | int) -> bool:
    """Whether the library (a path or an open descriptor) embeds a CUDA module (a rare false match
    only loads TVM's CUDA backend)."""
    return _holds(source, _CUDA_KIND)


def ensure_runtime_extra() -> None:
    """Load libtvm_runtime_extra (the contrib sort, topk, random functions) where TVM did not load it.

    A full TVM loads it on import; a runtime-only install does not, and a library that calls those
    functions by name would fail at its first call.
    """
    import tvm

    with _LOCK:
        if "tvm_runtime_extra" in tvm.base._LOADED_LIBS:
            return
        lib = Path(tvm.__file__).parent / "lib" / "libtvm_runtime_extra.so"
        if not lib.is_file():
            raise LoadError(f"this library calls TVM's contrib functions (sort, topk, random), which live in "
                            f"{lib.name}, and this TVM install has none; install the full apache-tvm wheel")
        try:
            tvm.base._LOADED_LIBS["tvm_runtime_extra"] = ctypes.CDLL(str(lib), mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            raise LoadError(f"cannot load TVM's {lib.name}: {exc}") from None


def _cudart_candidates() -> list[str]:
    found = []
    try:
        import nvidia

        for root in getattr(nvidia, "__path__", []):
            found += sorted(glob.glob(os.path.join(root, "*", "lib", "libcudart.so.*")))
            found += sorted(glob.glob(os.path.join(root, "cuda_runtime", "lib", "libcudart.so.*")))
    except ImportError:
        pass
    return found


def ensure_cuda_backend() -> None:
    """Load TVM's CUDA runtime backend if it is not loaded (runtime-only installs do not load it)."""
    import tvm

    with _LOCK:
        if tvm.runtime.enabled("cuda"):
            return
        lib = Path(tvm.__file__).parent / "lib" / "libtvm_runtime_cuda.so"
        if not lib.is_file():
            raise LoadError(f"this TVM install has no CUDA runtime backend ({lib} is missing); "
                            "install a CUDA-enabled apache-tvm")
        try:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        except OSError as first:
            for cand in _cudart_candidates():  # the CUDA runtime from NVIDIA's wheels, if present
                try:
                    ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
                    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    continue
            else:
                hint = ("no CUDA driver is installed (libcuda.so.1)" if "libcuda.so" in str(first)
                        else "the CUDA runtime library is missing (pip install nvidia-cuda-runtime)")
                raise LoadError(f"cannot load TVM's CUDA backend: {first}; {hint}") from None


def load_library(source: str | os.PathLike | LibraryFile, cuda: bool | None = None, device_query: Any = None,
                 device_index: int = 0) -> Any:
    """Load a library built by jitflow (or TVM); `cuda` skips looking for device code when known.

    `source` is a path or a LibraryFile held open by the cache. Either way the file is checked
    (whole, for this machine's CPU, a TVM library) and loaded through one open descriptor: a name
    changed in between is never what gets loaded. A bad file is a LoadError that says which.
    A CUDA library is also checked against GPU `device_index` and its driver (as `device_query`,
    a runtime.compat.DeviceQuery, reports them; default the CUDA driver): LoadError if it cannot run.
    """
    import tvm  # noqa: F401  (registers the runtime's loaders)

    if isinstance(source, LibraryFile):
        return _load_open(source, cuda, device_query, device_index)
    path = os.fspath(source)
    try:
        opened = LibraryFile.open(path)
    except OSError as exc:
        raise LoadError(f"no library at {path}: {exc.strerror}") from None
    with opened:
        return _load_open(opened, cuda, device_query, device_index)


def _load_open(library: LibraryFile, cuda: bool | None, device_query: Any, device_index: int) -> Any:
    import tvm_ffi

    try:
        why = library_check.problem(library.fd)
    except (OSError, ValueError) as exc:
        why = f"cannot be read: {exc}"
    if why:
        raise LoadError(f"cannot load {library.path}: {why}")
    if cuda is None:
        cuda = needs_cuda(library.fd)
    if cuda:
        from .compat import check_library

        check_library(library, device_query, device_index)
        ensure_cuda_backend()
    if _holds(library.fd, _CONTRIB):
        ensure_runtime_extra()
    try:
        with library.loader_path() as name:
            module = tvm_ffi.get_global_func("ffi.Module.load_from_file.so")(name, "so")
        tvm_ffi.get_global_func("ffi.ModuleGlobalsAdd")(module)  # kept alive, as tvm_ffi.load_module does
        return module
    except Exception as exc:
        raise LoadError(f"the TVM runtime could not load {library.path}: {exc}") from None
