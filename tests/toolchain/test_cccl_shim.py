"""NVRTC with the small in-memory CCCL headers emits the same kernels as with the real headers."""
from __future__ import annotations

import re

import kernels
import pytest

import jitflow
from jitflow.builder import lower, prepare
from jitflow.target import resolve_target
from jitflow.toolchain import cccl_shim as cuda_std_shim
from jitflow.toolchain import nvrtc as cuda_nvrtc


def _source(mod) -> str:
    spec = resolve_target("cuda", "sm_90")
    lowered = lower.lower(prepare.prepare(mod), spec)
    (device,) = lowered.devices
    return device.source


def _entries(ptx: bytes) -> list[str]:
    text = ptx.rstrip(b"\0").decode()
    return re.findall(r"\.visible \.entry.*?\n}\n", text, re.DOTALL)


@pytest.mark.parametrize("make", [kernels.vecadd_cuda, kernels.matmul_shared], ids=["vecadd", "matmul_shared"])
def test_shim_and_real_headers_give_identical_kernels(make):
    source = _source(make())
    assert cuda_std_shim.applies(source)
    _, ptx_shim, _ = cuda_nvrtc._compile_one(source, "sm_90", [], None, use_shim=True)
    _, ptx_real, _ = cuda_nvrtc._compile_one(source, "sm_90", [], None, use_shim=False)
    assert _entries(ptx_shim) and _entries(ptx_shim) == _entries(ptx_real)


def test_other_includes_use_the_real_headers(cache_dir, tmp_path):
    source = _source(kernels.vecadd_cuda(dtype="float16"))
    assert "cuda_fp16.h" in source and not cuda_std_shim.applies(source)
    exe = jitflow.compile(kernels.vecadd_cuda(dtype="float16"), "cuda", arch="sm_80")
    exe.export_library(tmp_path / "half.so")  # compiles with the full CUDA and CCCL headers
    assert exe.build_info.outcome == "built"


def test_shim_refuses_sources_with_unknown_includes():
    assert not cuda_std_shim.applies('#include <cuda/std/cstdint>\n#include <cuda/std/limits>\n')
    assert not cuda_std_shim.applies("extern \"C\" __global__ void k() {}\n")
    assert cuda_std_shim.applies('#include <cuda/std/cstdint>\n')
