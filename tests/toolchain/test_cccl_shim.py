"""NVRTC with the small in-memory CCCL headers emits the same kernels as with the real headers."""
from __future__ import annotations

import re

import kernels
import pytest

import jitflow
from jitflow.builder import lower
from jitflow.inputs import ir_module
from jitflow.targets import resolve_target
from jitflow.toolchain.cuda import cccl_shim as cuda_std_shim
from jitflow.toolchain.cuda import nvrtc as cuda_nvrtc


def masked(n: int = 256):
    """A[i] where positive, else -inf: TVM's CUDA names -inf CUDART_INF_F, from math_constants.h."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        for i in T.thread_binding(n, thread="threadIdx.x"):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = T.if_then_else(A[vi] > T.float32(0), A[vi], T.float32("-inf"))

    return tvm.IRModule({"main": main})


def _source(mod) -> str:
    spec = resolve_target("cuda", "sm_90")
    lowered = lower.lower(ir_module.prepare(mod), spec)
    (device,) = lowered.devices
    return device.source


def _entries(ptx: bytes) -> list[str]:
    text = ptx.rstrip(b"\0").decode()
    return re.findall(r"\.visible \.entry.*?\n}\n", text, re.DOTALL)


@pytest.mark.parametrize("make", [kernels.vecadd_cuda, kernels.matmul_shared, masked],
                         ids=["vecadd", "matmul_shared", "masked"])
def test_shim_and_real_headers_give_identical_kernels(make):
    source = _source(make())
    assert cuda_std_shim.applies(source)
    assert cuda_std_shim.needs_wheel_headers(source) == ("math_constants.h" in source)
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
    assert cuda_std_shim.applies('#include <cuda/std/cstdint>\n#include <math_constants.h>\n')
    assert not cuda_std_shim.applies('#include <math_constants.h>\n')
