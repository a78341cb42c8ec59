"""TVM's runtime libraries, found and loaded without importing the `tvm` package.

A shipped library needs tvm_ffi and TVM's runtime: `libtvm_runtime.so` (loaded with its symbols
global, for the libraries that call into it), `libtvm_runtime_cuda.so` for device code and
`libtvm_runtime_extra.so` for the contrib functions (sort, top-k, random) called by name. They are
found through the `apache-tvm` distribution's metadata, else through the `tvm` package folder on the
import path (a TVM copied as a folder), or where an imported `tvm` loaded them: never by importing
it, which costs most of a second and brings TVM's compiler. A later `import tvm` loads the same
files, which the dynamic loader hands back as the libraries already loaded.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import LoadError
from ..files import folder_trust

RUNTIME, CUDA, EXTRA = "libtvm_runtime.so", "libtvm_runtime_cuda.so", "libtvm_runtime_extra.so"
_LOCK = threading.Lock()
_HANDLES: dict[str, ctypes.CDLL] = {}
_INSTALL = "install TVM's runtime: pip install 'apache-tvm==0.27.0.post1'"


@lru_cache(maxsize=1)
def _metadata_folder() -> Path | None:
    import importlib.metadata

    try:
        lib = Path(str(importlib.metadata.distribution("apache-tvm").locate_file(f"tvm/lib/{RUNTIME}")))
    except importlib.metadata.PackageNotFoundError:
        return None
    return lib.parent if lib.is_file() else None


@lru_cache(maxsize=1)
def _import_path_folder() -> Path | None:
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("tvm")   # finds the folder; imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        if (Path(folder) / "lib" / RUNTIME).is_file():
            return Path(folder) / "lib"
    return None


def lib_folder() -> Path:
    """The folder of TVM's runtime libraries (LoadError when there is no TVM runtime): TVM_LIBRARY_PATH
    where it holds them, as TVM searches it first, else the imported `tvm`'s, else the installed one."""
    from ..config import tvm_library_folder

    override = tvm_library_folder()
    if override is not None and (override / RUNTIME).is_file():
        _check_trusted(override)
        return override
    imported = sys.modules.get("tvm")
    if imported is not None and getattr(imported, "__file__", None):
        return Path(imported.__file__).parent / "lib"     # the libraries this process already uses
    folder = _metadata_folder() or _import_path_folder()
    if folder is None:
        raise LoadError(f"no TVM runtime found ({RUNTIME} of the apache-tvm distribution); {_INSTALL}")
    return folder


def _check_trusted(folder: Path) -> None:
    """Refuse TVM_LIBRARY_PATH unless the folder, and each of TVM's libraries in it, pass the cache's
    trust rules (files/folder_trust.py): a library planted where others can write would run its constructors
    in this process the moment it is loaded."""
    problem = folder_trust.folder_problem(folder, installed=True)
    for name in (RUNTIME, CUDA, EXTRA):
        if problem is None and os.path.lexists(folder / name):
            problem = folder_trust.file_problem(folder / name)
    if problem:
        raise LoadError(f"refusing TVM_LIBRARY_PATH={folder}: {problem}; another user could put a library there "
                        "that runs when it is loaded. Fix: make the folder and the libraries in it yours (or root's) "
                        "and writable by you alone (chmod go-w), or unset TVM_LIBRARY_PATH to load the installed TVM's")


def _already_loaded(path: Path) -> bool:
    try:
        ctypes.CDLL(str(path), mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


def _load(name: str, mode: int) -> None:
    lib = lib_folder() / name
    if not lib.is_file():
        raise LoadError(f"this TVM install has no {name} ({lib} is missing); {_INSTALL}")
    try:
        _HANDLES[name] = ctypes.CDLL(str(lib), mode=mode)
    except OSError as exc:
        raise LoadError(f"cannot load TVM's {name}: {exc}") from None


def ensure_runtime() -> None:
    """tvm_ffi imported and libtvm_runtime loaded (global symbols), once per process."""
    if RUNTIME in _HANDLES:
        return
    import tvm_ffi  # noqa: F401  (loads libtvm_ffi first, as TVM does)

    with _LOCK:
        if RUNTIME not in _HANDLES:
            _load(RUNTIME, ctypes.RTLD_GLOBAL)


def ensure_extra() -> None:
    """libtvm_runtime_extra loaded (TVM's contrib sort, top-k, random), where nothing loaded it yet."""
    ensure_runtime()
    with _LOCK:
        if EXTRA not in _HANDLES and not _already_loaded(lib_folder() / EXTRA):
            _load(EXTRA, ctypes.RTLD_LOCAL)


def cuda_enabled() -> bool:
    import tvm_ffi

    return tvm_ffi.get_global_func("device_api.cuda", allow_missing=True) is not None


def cudart_candidates() -> list[str]:
    """The CUDA runtime libraries of NVIDIA's wheels, for a libtvm_runtime_cuda.so that finds none."""
    found = []
    try:
        import nvidia

        for root in getattr(nvidia, "__path__", []):
            found += sorted(glob.glob(os.path.join(root, "*", "lib", "libcudart.so.*")))
            found += sorted(glob.glob(os.path.join(root, "cuda_runtime", "lib", "libcudart.so.*")))
    except ImportError:
        pass
    return found


def ensure_cuda() -> None:
    """TVM's CUDA backend loaded (a runtime-only TVM, or none imported, does not load it by itself)."""
    ensure_runtime()
    with _LOCK:
        if cuda_enabled():
            return
        lib = lib_folder() / CUDA
        if not lib.is_file():
            raise LoadError(f"this TVM install has no CUDA runtime backend ({lib} is missing); "
                            "install a CUDA-enabled apache-tvm")
        try:
            _HANDLES[CUDA] = ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        except OSError as first:
            for cand in cudart_candidates():  # the CUDA runtime from NVIDIA's wheels, if present
                try:
                    ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
                    _HANDLES[CUDA] = ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
                    return
                except OSError:
                    continue
            hint = ("no CUDA driver is installed (libcuda.so.1)" if "libcuda.so" in str(first)
                    else "the CUDA runtime library is missing (pip install nvidia-cuda-runtime)")
            raise LoadError(f"cannot load TVM's CUDA backend: {first}; {hint}") from None
