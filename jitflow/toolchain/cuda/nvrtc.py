"""CUDA source -> fatbin with NVRTC and nvfatbin from NVIDIA's pip wheels (no CUDA toolkit)."""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from ...errors import CompileError, ToolMissingError
from ...targets.cuda_floor import CudaVersion
from . import cccl_shim, fatbin_build, ptx_floor
from .cuda_flags import CudaFlags

log = logging.getLogger("jitflow")
INSTALL_HINT = fatbin_build.INSTALL_HINT


#: the wheel that brings libnvrtc, and how to install it
WHEEL = "nvidia-cuda-nvrtc"
WHEEL_HINT = f"pip install '{WHEEL}>=13,<14' (or the CUDA extra: pip install 'jitflow[cuda]')"


def _bindings():
    """cuda-python's NVRTC bindings, with libnvrtc loaded: a ToolMissingError naming the wheel otherwise."""
    return fatbin_build.loaded_binding("nvrtc", "nvrtcVersion", "NVRTC's library (libnvrtc.so.13)", WHEEL_HINT)


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """The CUDA and CCCL header folders of the installed nvidia-* wheels."""
    try:
        import nvidia
    except ImportError:
        raise ToolMissingError(f"the NVIDIA CUDA wheels are not installed; {INSTALL_HINT}") from None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13", "cu12"):
            inc = Path(root) / sub / "include"
            if (inc / "cccl" / "cuda" / "std").is_dir():
                return (str(inc / "cccl"), str(inc))
    raise ToolMissingError(f"the CCCL headers (nvidia-cuda-cccl) were not found; {INSTALL_HINT}")


def _check(result, what: str, log_text: str = "", source: Path | None = None) -> None:
    nvrtc = _bindings()
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise CompileError("NVRTC", what, f"{err!r}\n{log_text}", source)


def _output(get_size: Callable, get: Callable, prog, what: str) -> bytes:
    """One of NVRTC's outputs (log, CUBIN, PTX), copied out of a buffer of our own.

    NVRTC writes into the buffer it is given, so that buffer must be mutable memory: a `bytes`
    object is not (`b" " * 1` is the interpreter's shared one-byte `b" "`, and NVRTC's NUL would
    change every `b" "` in the process)."""
    _, size = get_size(prog)
    buf = bytearray(int(size))
    _check(get(prog, buf), f"nvrtcGet{what}")
    return bytes(buf)


def _compile_one(source: str, arch: str, options: Sequence[str], source_path: Path | None,
                 use_shim: bool | None = None, flags: CudaFlags = CudaFlags()):
    """One NVRTC compile for one arch: (cubin, ptx, log)."""
    nvrtc = _bindings()
    if use_shim is None:
        use_shim = cccl_shim.applies(source)
    names = list(cccl_shim.HEADERS) if use_shim else []
    bodies = [cccl_shim.HEADERS[n].encode() for n in names]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernels.cu", len(names), bodies,
                                         [n.encode() for n in names])
    _check((err,), "nvrtcCreateProgram")
    if not use_shim:
        includes = [f"-I{d}" for d in include_dirs()]
    else:                          # the CUDA (not CCCL) folder, for a self-contained header it may read
        includes = [f"-I{include_dirs()[-1]}"] if cccl_shim.needs_wheel_headers(source) else []
    opts = [f"--gpu-architecture={arch}", "-default-device", "--device-int128", *flags.defines,
            *[f"--ptxas-options={p}" for p in flags.ptxas], *flags.extra, *includes, *options]
    try:
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log_bytes = _output(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, prog, "log")
        text = log_bytes.rstrip(b"\0").decode(errors="replace")
        if int(res) != 0:
            raise CompileError("NVRTC", "nvrtcCompileProgram " + " ".join(opts), text, source_path)
        cubin = _output(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, prog, "CUBIN")
        ptx = _output(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, prog, "PTX")
        return cubin, ptx, text
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@lru_cache(maxsize=1)
def supported_archs() -> tuple[str, ...]:
    """The SASS archs this NVRTC compiles for ('sm_75', 'sm_80', ...)."""
    nvrtc = _bindings()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    _check((err,), "nvrtcGetSupportedArchs")
    return tuple(f"sm_{a}" for a in archs)


def ptx(source: str, arch: str, options: Sequence[str] = (), flags: CudaFlags = CudaFlags()) -> str:
    """The PTX NVRTC makes of `source` for `arch` with a build's options and flags (what becomes its SASS)."""
    _cubin, text, _log = _compile_one(source, arch, list(options), None, flags=flags)
    return text.rstrip(b"\0").decode("utf-8", errors="replace")


@lru_cache(maxsize=1)
def cuda_version() -> CudaVersion:
    """The CUDA version of the installed NVRTC (13.5 for the 13.5 wheel), asked once per process."""
    nvrtc = _bindings()
    err, major, minor = nvrtc.nvrtcVersion()
    _check((err,), "nvrtcVersion")
    return CudaVersion(major, minor)


def compile_fatbin(source: str, archs: Sequence[str], options: Sequence[str] = (),
                   source_path: Path | None = None,
                   on_arch: Callable[[str, float], None] | None = None,
                   floor: CudaVersion | None = None, flags: CudaFlags = CudaFlags()) -> tuple[bytes, str]:
    """Compile `source` to a fatbin with SASS for each arch and PTX for the lowest: (fatbin, log).

    The archs compile side by side (NVRTC releases the GIL while it compiles); `on_arch` hears of each
    as it is done, with the seconds since the start. floor: the PTX is brought to an ISA the driver of
    that CUDA version JIT-compiles (ptx_floor.py).
    """
    start = time.perf_counter()
    fatbin_build.require()      # before compiling: a missing nvfatbin says so at once

    def one(arch: str):
        result = _compile_one(source, arch, options, source_path, flags=flags)
        if on_arch:
            on_arch(arch, time.perf_counter() - start)
        return result

    with ThreadPoolExecutor(max_workers=max(1, len(archs)), thread_name_prefix="jitflow-nvrtc") as pool:
        results = list(pool.map(one, archs))
    images = []
    for i, (arch, (cubin, ptx, _)) in enumerate(zip(archs, results)):
        images.append(fatbin_build.Image("sass", arch, cubin))
        if i == 0:
            if floor is not None:
                ptx = ptx_floor.to_floor(ptx.rstrip(b"\0"), arch, floor, source_path)
            images.append(fatbin_build.Image("ptx", "compute_" + arch[len("sm_"):], ptx))
    logs = "\n".join(f"== {arch} ==\n{text}" for arch, (_, _, text) in zip(archs, results))
    try:
        return fatbin_build.build(images), logs
    except CompileError as exc:
        raise CompileError(exc.tool, exc.command, exc.log, source_path) from None
