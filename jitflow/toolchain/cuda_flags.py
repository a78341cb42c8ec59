"""Device compiler flags shared by the NVRTC and nvcc paths, matching TVM's own CUDA build."""
from __future__ import annotations

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
    "--use_fast_math",
]
PTXAS = ["-v", "--register-usage-level=10", "--warn-on-local-memory-usage"]
