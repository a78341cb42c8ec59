"""What this machine has for jitflow (`jitflow doctor`): each check says what it found and, if
wrong, the fix. The shared tier's backends answer with the same Check."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Check:
    """One line of a health check: what was checked, whether it passed, what was seen, the fix;
    a check that is not required only warns."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


# the tvm-ffi release checked against the pinned TVM (pyproject.toml says why it is pinned)
CHECKED_TVM_FFI = "0.1.14.post0"
# the ml_dtypes release checked (tvm-ffi imports it in every process; 0.7.0 takes 0.4 s to import)
CHECKED_ML_DTYPES = "0.6.0"


def _pinned_check(name: str, distribution: str, checked: str, found: str | None, missing: str, why: str,
                  required: bool = True) -> Check:
    """A pinned dependency against the release checked with jitflow: `missing` when it is absent,
    `why` (said after the versions) when it is another release."""
    fix = f"pip install '{distribution}=={checked}'"
    if found is None:
        return Check(name, False, missing, fix)
    if found != checked:
        return Check(name, False, f"{found}, not the checked {checked}{why}", fix, required=required)
    return Check(name, True, found)


def tvm_ffi_check(found: str | None) -> Check:
    """tvm-ffi against the checked release: another one may crash TVM (0.1.15's JSON serializer does)."""
    return _pinned_check("tvm-ffi", "apache-tvm-ffi", CHECKED_TVM_FFI, found, "not installed",
                         " (TVM 0.27's JSON serializer segfaults with 0.1.15)")


def ml_dtypes_check(found: str | None) -> Check:
    """ml_dtypes against the checked release: another one may make every load slower (0.7.0 takes
    about 0.4 s to import, and tvm-ffi imports it). A warning: libraries still build and load."""
    return _pinned_check("ml_dtypes", "ml_dtypes", CHECKED_ML_DTYPES, found, "not installed (TVM needs it)",
                         ": tvm-ffi imports it in every process that loads a library (0.7.0 takes about 0.4 s "
                         "to import, 0.6.0 0.05 s)", required=False)


def _version_of(distribution: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tvm() -> list[Check]:
    ffi_version, ml_dtypes_version = _version_of("apache-tvm-ffi"), _version_of("ml_dtypes")
    try:
        import tvm
    except Exception as exc:  # noqa: BLE001 - a broken install must be reported, not raised
        return [Check("TVM", False, f"cannot import tvm: {exc}", "pip install 'apache-tvm==0.27.0.post1'"),
                tvm_ffi_check(ffi_version), ml_dtypes_check(ml_dtypes_version)]
    runtime_only = bool(getattr(tvm.base, "_RUNTIME_ONLY", False))
    return [Check("TVM", True, f"{tvm.__version__}"), tvm_ffi_check(ffi_version), ml_dtypes_check(ml_dtypes_version),
            Check("TVM compiler", not runtime_only,
                  "runtime only (can load libraries, cannot build)" if runtime_only else "present",
                  "unset TVM_USE_RUNTIME_LIB or install the full apache-tvm wheel to build")]


def _zig(configured: Path | None, readonly: bool = False) -> list[Check]:
    """zig and its cache folder; with `readonly` (JITFLOW_CACHE=readonly: nothing is built) the folder
    is looked at, never created."""
    from ..errors import JitflowError
    from ..files import folder_trust
    from ..toolchain.zig_cc import zig_cache, zig_wheel

    try:
        exe, version = zig_wheel.zig_binary(), zig_wheel.version()
    except JitflowError as exc:
        return [Check("zig", False, str(exc), "pip install ziglang")]
    wanted = configured or zig_cache.default_location()
    if readonly:
        problem = folder_trust.folder_problem(wanted) if os.path.lexists(wanted) else None
        state = "not created" if not os.path.lexists(wanted) else "private" if problem is None else problem
        detail, ok = f"{wanted} ({state}; read-only mode builds nothing, so it is not needed)", True
        return [Check("zig", True, f"{version} ({exe})"), Check("zig cache", ok, detail, "", required=False)]
    try:
        detail, ok = f"{zig_cache.private_folder(wanted)} (private, shared by every cache folder)", True
    except JitflowError as exc:
        detail, ok = f"{exc}; builds use a temporary folder instead", False
    return [Check("zig", True, f"{version} ({exe})"),
            Check("zig cache", ok, detail, "set JITFLOW_ZIG_CACHE_DIR to a private, writable folder",
                  required=False)]


def _cuda_compilers() -> list[Check]:
    from ..errors import JitflowError
    from ..toolchain.cuda import cuda_toolkit, fatbin_build, nvcc
    from ..toolchain.cuda import nvrtc as nvrtc_wheels

    out = []
    for name, version, wheel in (("NVRTC", lambda: str(nvrtc_wheels.cuda_version()), nvrtc_wheels.WHEEL_HINT),
                                 ("nvfatbin", fatbin_build.version, fatbin_build.WHEEL_HINT)):
        try:
            out.append(Check(name, True, version()))
        except Exception as exc:  # noqa: BLE001 - a broken install must be reported, not raised
            out.append(Check(name, False, f"not loadable: {exc}", wheel))
    from ..toolchain.cuda import nvjitlink

    if nvjitlink.available():
        out.append(Check("nvJitLink", True, nvjitlink.version()))
    else:
        out.append(Check("nvJitLink", False, "not loadable (it proves a library's PTX valid for its CUDA floor)",
                         nvjitlink.INSTALL_HINT))
    try:
        out.append(Check("CUDA headers (CCCL)", True, nvrtc_wheels.include_dirs()[-1]))
    except JitflowError as exc:
        out.append(Check("CUDA headers (CCCL)", False, str(exc), "pip install 'jitflow[cuda]'"))
    found = cuda_toolkit.find("nvcc")
    if found:
        out.append(Check("nvcc", True, f"{nvcc.version()} ({found})", required=False))
    else:
        out.append(Check("nvcc", False, f"not in {cuda_toolkit.where('nvcc')} (optional: JITFLOW_CUDA_COMPILER=nvcc "
                         "needs it)", "install a CUDA toolkit if you want nvcc", required=False))
    return out


def _gpu() -> list[Check]:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(str(err))
        _, version = driver.cuDriverGetVersion()
        _, count = driver.cuDeviceGetCount()
        names = []
        for i in range(count):
            _, dev = driver.cuDeviceGet(i)
            _, raw = driver.cuDeviceGetName(64, dev)
            names.append(raw.split(b"\0")[0].decode())
        return [Check("CUDA driver", True, f"{version // 1000}.{version % 1000 // 10}, GPUs: {', '.join(names)}",
                      required=False)]
    except Exception as exc:  # noqa: BLE001
        return [Check("CUDA driver", False, f"none usable ({exc}); building works, running CUDA kernels needs one",
                      "install an NVIDIA driver where kernels run", required=False)]


def cache_dir_problem(path: Path, writing: bool = True) -> str | None:
    """Why `path` cannot be a cache folder (it or a parent is a file; with `writing`, it cannot be
    written), or None. Looks only: a folder that does not exist yet is fine where it can be created."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder" if existing.is_file() else f"{existing} is not a folder"
    if writing and not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def _readonly_cache(cache_dir: Path) -> list[Check]:
    """JITFLOW_CACHE=readonly: the folder must exist and be trusted for reading; nothing is written."""
    from ..files import folder_trust

    problem = folder_trust.folder_problem(cache_dir, installed=True)
    if problem:
        return [Check("cache directory", False, f"read-only cache: {problem}", "unpack a bundle into it "
                      "(docs/deploy.md), as this user or root, and make it readable; or set JITFLOW_CACHE_DIR")]
    return [Check("cache directory", True, f"{cache_dir} (read-only: lookups only, JITFLOW_CACHE=readonly)")]


def _cache(cache_dir: Path, readonly: bool = False) -> list[Check]:
    if readonly:
        return _readonly_cache(cache_dir)
    fix = "set JITFLOW_CACHE_DIR to a writable folder"
    problem = cache_dir_problem(cache_dir)
    if problem:
        return [Check("cache directory", False, problem, fix)]
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir):
            pass
    except OSError as exc:
        return [Check("cache directory", False, f"{cache_dir}: {exc.strerror}", fix)]
    from ..files import folder_trust

    untrusted = folder_trust.folder_problem(cache_dir)
    if untrusted:   # never read: builds use a private temporary folder instead (docs/reliability.md)
        return [Check("cache directory", False, f"not trusted: {untrusted}; builds use a private temporary "
                      "folder instead", "set JITFLOW_CACHE_DIR to a folder only you can write, or fix its permissions")]
    return [Check("cache directory", True, f"{cache_dir} (writable, private)")]


def run_checks(cuda: bool = True) -> list[Check]:
    """This machine's checks in order (CUDA compiler and driver checks only when `cuda`); the shared
    tier answers its own (cache.shared.backend.check). A bad JITFLOW_* setting is a failed check."""
    from ..config import resolve
    from ..errors import InvalidInputError

    cuda_checks: list[Callable[[], list[Check]]] = [_cuda_compilers, _gpu] if cuda else []
    try:
        settings = resolve()
    except InvalidInputError as exc:
        bad = Check("settings", False, str(exc), "fix or unset the variable (README: Settings)")
        return [c for group in [_tvm, lambda: [bad], *cuda_checks] for c in group()]
    groups = [_tvm, lambda: _zig(settings.zig_cache_dir, settings.cache_readonly), *cuda_checks,
              lambda: _cache(settings.cache_dir, settings.cache_readonly)]
    return [c for group in groups for c in group()]
