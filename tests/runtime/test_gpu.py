"""On a GPU: kernels built by jitflow against torch, in a full TVM and a runtime-only install."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ROOT, run_python

RUNS_IN_RUNTIME_ONLY_TVM = True   # collected in a TVM without its compiler too (conftest.py)

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

RUN_VECADD = """
    import torch, jitflow
    m = jitflow.load({path!r})
    a = torch.rand(1024, device="cuda"); b = torch.rand(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    m["main"](a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    print("ok")
"""
RUN_MATMUL = """
    import torch, jitflow
    m = jitflow.load({path!r})
    a = torch.rand(256, 256, device="cuda"); b = torch.rand(256, 256, device="cuda")
    c = torch.empty(256, 256, device="cuda")
    m["main"](a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    print("ok")
"""


def _compiler_present() -> bool:
    import tvm

    return not tvm.base._RUNTIME_ONLY


needs_compiler = pytest.mark.skipif(not _compiler_present(), reason="TVM without its compiler")


@needs_compiler
def test_vecadd_matches_torch(cache_dir):
    import kernels

    import jitflow

    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda")  # arch from the visible GPU
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    exe["main"](a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert exe.build_info.outcome == "built"


@needs_compiler
def test_shared_memory_matmul_matches_torch(cache_dir):
    import kernels

    import jitflow

    exe = jitflow.compile(kernels.matmul_shared(256, 16), "cuda", arch=["sm_80", "sm_90"])
    a, b = torch.rand(256, 256, device="cuda"), torch.rand(256, 256, device="cuda")
    c = torch.empty(256, 256, device="cuda")
    exe(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@needs_compiler
def test_second_process_hits_the_cache_on_gpu(cache_dir):
    import kernels

    import jitflow

    jitflow.compile(kernels.vecadd_cuda(threads=64), "cuda", arch="sm_90").jit()
    proc = run_python("""
        import torch, tvm, jitflow, kernels
        tvm.compile = None   # a hit must not need it
        exe = jitflow.compile(kernels.vecadd_cuda(threads=64), "cuda", arch="sm_90")
        a = torch.rand(1024, device="cuda"); c = torch.empty(1024, device="cuda")
        exe["main"](a, a, c); torch.cuda.synchronize()
        torch.testing.assert_close(c, a + a)
        print(exe.build_info.outcome)
    """)
    assert proc.stdout.split() == ["hit"]


@needs_compiler
def test_exported_library_runs_in_runtime_only_tvm(cache_dir, tmp_path):
    import kernels

    import jitflow

    out = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").export_library(tmp_path / "v.so")
    proc = run_python(RUN_VECADD.format(path=str(out)), env={"TVM_USE_RUNTIME_LIB": "1"})
    assert proc.stdout.split() == ["ok"]


ARTIFACTS = Path(os.environ.get("JITFLOW_GPU_ARTIFACTS", ROOT / ".gpu-artifacts"))


@pytest.mark.skipif(not ARTIFACTS.is_dir(), reason="no prebuilt artifacts (tests/gpu_artifacts.py)")
@pytest.mark.parametrize("name,code", [("vecadd.so", RUN_VECADD), ("matmul_shared.so", RUN_MATMUL),
                                       # no SASS for an sm_90 GPU: runs through its PTX (CUDA floor 13.0)
                                       ("vecadd_sm80.so", RUN_VECADD), ("matmul_sm80.so", RUN_MATMUL),
                                       ("matmul_portable.so", RUN_MATMUL)])
def test_prebuilt_library_runs_in_runtime_only_tvm(name, code):
    proc = run_python(code.format(path=str(ARTIFACTS / name)), env={"TVM_USE_RUNTIME_LIB": "1"})
    assert proc.stdout.split() == ["ok"]
