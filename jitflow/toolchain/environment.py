"""The environment that reaches the compilers, in one place: stripped where jitflow runs them,
keyed where it cannot strip.

zig cc and nvcc run as subprocesses and get a clean environment: only the variables in PASSED,
with LC_ALL=C, plus what jitflow sets itself (zig's cache folders). Everything else is dropped,
so variables such as these never change a library behind the cache's back:

- clang inside zig: CCC_OVERRIDE_OPTIONS (edits the command line: `+-Dexpf=exp2f`), CCC_ADD_ARGS,
  CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH, LIBRARY_PATH, COMPILER_PATH, SOURCE_DATE_EPOCH;
  zig: ZIG_LIB_DIR, ZIG_LIBC, ZIG_GLOBAL_CACHE_DIR/ZIG_LOCAL_CACHE_DIR (set by jitflow), NIX_CFLAGS_COMPILE,
  NIX_LDFLAGS; CC, CFLAGS, LDFLAGS;
- nvcc: NVCC_APPEND_FLAGS and NVCC_PREPEND_FLAGS (extra options such as --fmad=false), NVCC_CCBIN,
  the variables its nvcc.profile extends (INCLUDES, LIBRARIES, CUDAFE_FLAGS, PTXAS_FLAGS), and
  the host compiler's CPATH family (nvcc preprocesses with gcc).

NVRTC and nvfatbin run inside this process, so their variables cannot be stripped; the ones they
read (seen by interposing getenv around a compile with the 13.x wheels) go into the key when set:
NVRTC_KEYED. FINALIZER_USE_LEGACY_ELF_BUILDER, for one, changes the cubin, and NV_NVVM_VERSION
changes the NVVM IR. Those that only tune speed or locking (NVRTC_DISABLE_PCH, NVRTC_PCH_HEAP_SIZE,
NVRTC_INTERNAL_GLOBAL_LOCK, NVRTC_DISABLE_CONCURRENT_NVVM, LIBNVVM_DISABLE_CONCURRENT_API,
CUDA_CACHE_DISABLE, MAKEFLAGS) were checked to leave the bytes alone and are not keyed.
With line information (-lineinfo, -G) NVRTC also records the working folder: it is keyed then.

TVM's own CUDA variables (TVM_CUDA_PTXAS_REG_LEVEL, TVM_CUDA_PTXAS_EXTRA_OPTS, and per compiler
TVM_CUDA_NVRTC_EXTRA_OPTS or TVM_CUDA_NVCC_NO_FAST_MATH) are applied to the compilers' flags
(cuda_flags.py) and keyed when they change them: compiler_inputs.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

#: the only variables a compiler subprocess inherits (none of them changes what it writes)
PASSED = ("PATH", "TMPDIR")
#: variables NVRTC reads during a compile that can change its output: keyed when set
NVRTC_KEYED = ("NV_NVVM_VERSION", "FINALIZER_USE_LEGACY_ELF_BUILDER", "FINALIZER_CUBIE", "CAN_FINALIZE_DEBUG",
               "LLVM_OVERRIDE_PRODUCER", "EDG_BASE", "NVVM_IR_VER_CHK", "AS_SECURE_LOG_FILE",
               "LLVM_IGNORED_ENV_VAR", "bar")
#: device options that make NVRTC record the working folder in the output
_LINE_INFO = ("-lineinfo", "--generate-line-info", "-G", "--device-debug")


def for_compiler(extra: Mapping[str, str] | None = None,
                 source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a compiler subprocess: PASSED from `source` (os.environ), LC_ALL=C, `extra`."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in PASSED if name in source}
    env["LC_ALL"] = "C"
    env.update(extra or {})
    return env


def nvrtc_inputs(device_options: Sequence[str] = ()) -> dict[str, str]:
    """What of this process's environment reaches NVRTC's output: the set NVRTC_KEYED variables,
    and the working folder when the options ask for line information."""
    found = {name: os.environ[name] for name in NVRTC_KEYED if name in os.environ}
    if any(opt in _LINE_INFO for opt in device_options):
        found["cwd"] = os.getcwd()
    return found


def compiler_inputs(compiler: str, device_options: Sequence[str], tvm_cuda: Any) -> dict[str, str]:
    """What of the environment reaches the device compiler's output: for NVRTC, nvrtc_inputs; for
    both, the TVM_CUDA_* settings that change its flags (tvm_cuda: config.TvmCudaSettings)."""
    from .cuda.cuda_flags import applied

    found = nvrtc_inputs(device_options) if compiler == "nvrtc" else {}
    found.update(applied(tvm_cuda, compiler))
    return found
