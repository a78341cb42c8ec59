"""Load a built library with tvm_ffi and TVM's runtime libraries (never the `tvm` package), after
checking the file (library_check.py) through the descriptor it is loaded from (library_file.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import LibraryFormatError, LoadError
from . import cpu_features, ffi_abi, library_check, tensors, tvm_runtime
from .library_check import Checked
from .library_file import LibraryFile
from .library_module import named_module

#: kept for callers of earlier releases: TVM's CUDA backend and contrib library, loaded where missing
ensure_cuda_backend = tvm_runtime.ensure_cuda
ensure_runtime_extra = tvm_runtime.ensure_extra


def needs_cuda(source: str | os.PathLike | int) -> bool:
    """Whether the library (a path or an open descriptor) holds device code."""
    if isinstance(source, int):
        return "cuda" in _checked(source, source, verify=False).needs
    with LibraryFile.open(source) as library:
        return "cuda" in _checked(library.fd, library.path, verify=False).needs


def _checked(fd: int, path: Any, verify: bool) -> Checked:
    try:
        return library_check.check(fd, verify)
    except LibraryFormatError as exc:
        raise LoadError(f"cannot load {path}: {exc}") from None


def open_checked(path: str | os.PathLike) -> tuple[LibraryFile, Checked]:
    """The library at `path`, open, and what its checks found (its digest verified): LoadError when it
    cannot be loaded here."""
    path = Path(path).expanduser()
    try:
        library = LibraryFile.open(path)
    except OSError as exc:
        raise LoadError(f"no library at {path}: {exc.strerror}") from None
    try:
        return library, _checked(library.fd, path, verify=True)
    except BaseException:
        library.close()
        raise


def _check_here(library: LibraryFile, checked: Checked, device_query: Any, device_index: int, cuda: bool) -> None:
    """The checks of this machine before dlopen: the CPU features the library records, the tvm-ffi it
    was built against (ffi_abi.py), and for device code GPU `device_index` and its driver (runtime.compat)."""
    cpu_features.require(checked.cpu_needs, checked.cpu_level, f"cannot load {library.path}: it",
                         "load it on a CPU that has them")
    ffi_abi.check(checked.tvm_ffi, library.path)
    if cuda:
        from .compat import check_library

        check_library(library, device_query, device_index, checked.device_code)


def check_loadable(path: str | os.PathLike, device_query: Any = None, device_index: int = 0) -> Checked:
    """Every check jitflow.load makes of a library before the dynamic loader sees it (its digest and
    ELF headers, this CPU's features, and for device code the GPU and driver `device_query` reports),
    without loading it: a LoadError says why it would be refused, else what the checks found."""
    library, checked = open_checked(path)
    with library:
        _check_here(library, checked, device_query, device_index, "cuda" in checked.needs)
    return checked


def load_checked(library: LibraryFile, checked: Checked, device_query: Any = None, device_index: int = 0,
                 cuda: bool | None = None) -> Any:
    """Load a checked library: TVM's CUDA backend and contrib functions first where it needs them; a
    CUDA library is checked against GPU `device_index` and its driver first (runtime.compat), and every
    library against the CPU features it records (cpu_features.py)."""
    device = ("cuda" in checked.needs) if cuda is None else cuda
    _check_here(library, checked, device_query, device_index, device)
    tvm_runtime.ensure_runtime()
    tensors.install()
    if device:
        tvm_runtime.ensure_cuda()
    if "contrib" in checked.needs:
        tvm_runtime.ensure_extra()
    import tvm_ffi

    try:
        with library.loader_path() as name:
            module = tvm_ffi.get_global_func("ffi.Module.load_from_file.so")(name, "so")
        strings = checked.strings                                 # lib["mian"] lists the functions
        module = named_module(module, lambda: library_check.exported_functions(strings))
        tvm_ffi.get_global_func("ffi.ModuleGlobalsAdd")(module)  # kept alive, as tvm_ffi.load_module does
        return module
    except Exception as exc:
        raise LoadError(f"the TVM runtime could not load {library.path}: {exc}") from None


def load_library(source: str | os.PathLike | LibraryFile, cuda: bool | None = None, device_query: Any = None,
                 device_index: int = 0) -> Any:
    """Load a library built by jitflow (or TVM); `cuda` skips looking for device code when known.

    `source` is a path (its digest record is checked) or a LibraryFile held open by the cache (its
    sha256 checked there). Either way the file is checked (whole, for this machine's CPU, a TVM
    library) and loaded through one open descriptor: a name changed in between is never what gets
    loaded. A bad file is a LoadError that says which. A CUDA library is also checked against GPU
    `device_index` and its driver (as `device_query`, a runtime.compat.DeviceQuery, reports them;
    default the CUDA driver): LoadError if it cannot run.
    """
    if isinstance(source, LibraryFile):
        return load_checked(source, _checked(source.fd, source.path, verify=False), device_query, device_index,
                            cuda)
    library, checked = open_checked(source)
    with library:
        return load_checked(library, checked, device_query, device_index, cuda)


def load(path: str | os.PathLike, device_query: Any = None) -> Any:
    """Load an exported library with tvm_ffi and TVM's runtime (never the `tvm` package); TVM's CUDA
    backend is loaded when the library holds device code, its contrib library when it calls it.

    The file is checked before the dynamic loader sees it: its digest (a changed byte is a LoadError
    naming the file), its CPU (and the CPU features it needs: a LoadError names those this CPU lacks),
    that it is whole, the tvm-ffi it was built against (another minor version is a LoadError, another
    release of the same one a warning). A CUDA library is checked against the first GPU and
    its driver first (device_query: how they are found, a jitflow.runtime.compat.DeviceQuery;
    default the CUDA driver)."""
    return load_library(path, device_query=device_query)
