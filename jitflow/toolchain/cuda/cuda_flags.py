"""Device compiler flags shared by the NVRTC and nvcc paths, matching TVM's own CUDA build, and
TVM's CUDA variables applied to them as TVM applies them to its own build.

TVM reads TVM_CUDA_PTXAS_REG_LEVEL and TVM_CUDA_PTXAS_EXTRA_OPTS (ptxas flags, both compilers),
TVM_CUDA_NVRTC_EXTRA_OPTS (NVRTC flags after the defaults, so they can undo them) and
TVM_CUDA_NVCC_NO_FAST_MATH (nvcc without --use_fast_math). jitflow applies them the same way
(config.TvmCudaSettings), and they are in the key (toolchain/environment.py). Where one has no
meaning for the compiler jitflow uses (an NVRTC variable with nvcc, TVM_CUDA_COMPILE_MODE, which
picks TVM's compiler), jitflow says so once instead of ignoring it silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...logs import warn_once

FAST_MATH = "--use_fast_math"
DEFINES = [
    "-D__NV_SILENCE_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_DEPRECATION_END=",
    "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_HOST_DEPRECATION_END=",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    FAST_MATH,
]
REGISTER_LEVEL = 10
PTXAS = ["-v", f"--register-usage-level={REGISTER_LEVEL}", "--warn-on-local-memory-usage"]


@dataclass(frozen=True)
class CudaFlags:
    """The flags a device compile starts from: defines, ptxas flags, and (NVRTC) extra flags after them."""

    defines: tuple[str, ...] = tuple(DEFINES)
    ptxas: tuple[str, ...] = tuple(PTXAS)
    extra: tuple[str, ...] = ()


def applied(tvm: Any, compiler: str) -> dict[str, str]:
    """The TVM_CUDA_* settings that change what `compiler` builds, as text (for the key)."""
    out = {}
    if tvm.ptxas_reg_level is not None and tvm.ptxas_reg_level != REGISTER_LEVEL:
        out["TVM_CUDA_PTXAS_REG_LEVEL"] = str(tvm.ptxas_reg_level)
    if tvm.ptxas_extra:
        out["TVM_CUDA_PTXAS_EXTRA_OPTS"] = " ".join(tvm.ptxas_extra)
    if compiler == "nvrtc" and tvm.nvrtc_extra:
        out["TVM_CUDA_NVRTC_EXTRA_OPTS"] = " ".join(tvm.nvrtc_extra)
    if compiler == "nvcc" and tvm.nvcc_no_fast_math:
        out["TVM_CUDA_NVCC_NO_FAST_MATH"] = "1"
    return out


def _warn_unused(tvm: Any, compiler: str) -> None:
    if compiler == "nvcc" and tvm.nvrtc_extra:
        warn_once("TVM_CUDA_NVRTC_EXTRA_OPTS", "jitflow: TVM_CUDA_NVRTC_EXTRA_OPTS applies to NVRTC only (as in TVM) "
                  "and this build uses nvcc: not applied; pass nvcc flags as device_options=")
    if compiler == "nvrtc" and tvm.nvcc_no_fast_math:
        warn_once("TVM_CUDA_NVCC_NO_FAST_MATH", "jitflow: TVM_CUDA_NVCC_NO_FAST_MATH applies to nvcc only (as in "
                  "TVM) and this build uses NVRTC, with --use_fast_math: not applied; to undo parts of fast math "
                  "with NVRTC set TVM_CUDA_NVRTC_EXTRA_OPTS (for example '--ftz=false --prec-div=true')")
    if tvm.compile_mode and tvm.compile_mode != compiler:
        warn_once("TVM_CUDA_COMPILE_MODE", "jitflow: TVM_CUDA_COMPILE_MODE=%s chooses TVM's own CUDA compiler and "
                  "is not used here: this build uses %s (choose with cuda_compiler= or JITFLOW_CUDA_COMPILER)",
                  tvm.compile_mode, compiler)


def recorded(found: Mapping[str, Any], compiler: str) -> CudaFlags:
    """The flags of a build whose key inputs recorded `found` (as applied() writes them), for a report
    that compiles again what the fatbin does not keep; anything unreadable counts as unset."""
    import shlex

    from ...config import TvmCudaSettings

    def flags(name: str) -> tuple[str, ...]:
        text = found.get(name)
        if not isinstance(text, str):
            return ()
        try:
            return tuple(shlex.split(text))
        except ValueError:
            return tuple(text.split())

    level = found.get("TVM_CUDA_PTXAS_REG_LEVEL")
    tvm = TvmCudaSettings(nvrtc_extra=flags("TVM_CUDA_NVRTC_EXTRA_OPTS"),
                          ptxas_reg_level=int(level) if isinstance(level, str) and level.isdigit() else None,
                          ptxas_extra=flags("TVM_CUDA_PTXAS_EXTRA_OPTS"),
                          nvcc_no_fast_math=found.get("TVM_CUDA_NVCC_NO_FAST_MATH") == "1")
    return for_build(tvm, compiler)


def for_build(tvm: Any, compiler: str) -> CudaFlags:
    """The flags for a device compile with `compiler` under TVM's CUDA variables `tvm`
    (config.TvmCudaSettings); says once which of them does not apply."""
    _warn_unused(tvm, compiler)
    level = REGISTER_LEVEL if tvm.ptxas_reg_level is None else tvm.ptxas_reg_level
    ptxas = tuple(f"--register-usage-level={level}" if f.startswith("--register-usage-level=") else f
                  for f in PTXAS) + tuple(tvm.ptxas_extra)
    defines = tuple(d for d in DEFINES if not (compiler == "nvcc" and tvm.nvcc_no_fast_math and d == FAST_MATH))
    return CudaFlags(defines=defines, ptxas=ptxas, extra=tuple(tvm.nvrtc_extra) if compiler == "nvrtc" else ())
