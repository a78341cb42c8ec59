"""The versions of the tools that build a library: part of every cache key.

A cache hit takes a key and compiles nothing, so nothing here imports the compilers' wrappers:
zig's version comes from the ziglang wheel (zig_wheel.py), tvm-ffi's and NVRTC's from their wheels'
metadata, each read from the listing of the site folder that holds it (dist_info.py) once per
process. Only nvcc is asked (`nvcc --version`, nvcc.py), where it is the chosen compiler.

tvm-ffi is keyed on its own: TVM leaves its version open, and every library is compiled against
tvm-ffi's headers and calls its C ABI (the library records it too: runtime/ffi_abi.py checks it at load).
"""
from __future__ import annotations

import importlib.util
from functools import lru_cache

from .._version import __version__
from ..targets import TargetSpec
from . import dist_info
from .zig_cc import zig_wheel

#: the NVIDIA wheels whose versions name an NVRTC build's compiler
NVRTC_WHEELS = ("nvidia-cuda-nvrtc", "nvidia-nvfatbin", "nvidia-cuda-cccl")
#: tvm-ffi's distribution
TVM_FFI = "apache-tvm-ffi"
#: what the version of a package that is not installed reads as
MISSING = "missing"


@lru_cache(maxsize=1)
def tvm_ffi() -> str:
    """tvm-ffi's installed version ('0.1.14.post0'), from the metadata beside its package (found, not
    imported); MISSING when it is not installed."""
    spec = importlib.util.find_spec("tvm_ffi")
    sites = [dist_info.site_of(root) for root in (spec.submodule_search_locations or [])] if spec else []
    return dist_info.version(TVM_FFI, sites) or MISSING


@lru_cache(maxsize=1)
def nvrtc() -> str:
    """NVRTC's, nvfatbin's and CCCL's wheel versions ('nvidia-cuda-nvrtc==13.5.1;...'), 'missing' for
    one that is not installed."""
    try:
        import nvidia

        sites = [dist_info.site_of(root) for root in getattr(nvidia, "__path__", [])]
    except ImportError:
        sites = []
    return ";".join(f"{dist}=={dist_info.version(dist, sites) or MISSING}" for dist in NVRTC_WHEELS)


def tool_versions(spec: TargetSpec, cuda_compiler: str) -> dict[str, str]:
    """Versions of jitflow, TVM, tvm-ffi, zig and (for CUDA) the device compiler."""
    import tvm

    versions = {"jitflow": __version__, "tvm": tvm.__version__, "tvm_ffi": tvm_ffi(), "zig": zig_wheel.version()}
    if spec.is_cuda:
        if cuda_compiler == "nvcc":
            from .cuda import nvcc

            versions["cuda_compiler"] = nvcc.version()
        else:
            versions["cuda_compiler"] = nvrtc()
    return versions
