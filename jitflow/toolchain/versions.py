"""The versions of the tools that build a library: part of every cache key."""
from __future__ import annotations

from .._version import __version__
from ..targets import TargetSpec
from . import nvcc, nvrtc, zig


def tool_versions(spec: TargetSpec, cuda_compiler: str) -> dict[str, str]:
    """Versions of jitflow, TVM, zig and (for CUDA) the device compiler."""
    import tvm

    versions = {"jitflow": __version__, "tvm": tvm.__version__, "zig": zig.version()}
    if spec.is_cuda:
        if cuda_compiler == "nvcc":
            versions["cuda_compiler"] = nvcc.version()
        else:
            versions["cuda_compiler"] = nvrtc.version()
    return versions
