"""No build path writes into Python's immutable objects.

NVRTC (like every C library jitflow calls) writes its outputs into the buffer it is handed. A
`bytes` buffer of one byte is the interpreter's shared `b" "`: NVRTC's NUL then turns every `b" "`
in the process into `b"\\x00"` (`print("a", 1)` separates with NUL, `numpy.save` writes headers
`numpy.load` refuses). Each path below runs in a fresh process and checks the interpreter after it.
"""
from __future__ import annotations

import shutil
import textwrap

import pytest
from conftest import run_python

#: run after a path: the shared one-byte objects and a numpy file round trip are what they were
INTACT = """
    import io, numpy as _np
    assert " ".encode()[0] == 32 and b" "[0] == 32, "b' ' was written into"
    assert b"\\x00"[0] == 0 and bytes(1) == b"\\x00"
    _buf = io.BytesIO()
    _np.save(_buf, _np.arange(5, dtype="float32"))
    _buf.seek(0)
    assert (_np.load(_buf) == _np.arange(5, dtype="float32")).all()
    print("intact")
"""

#: CUDA source that NVRTC compiles without a word when ptxas is not verbose (its log is then empty:
#: a buffer of one byte), and one with a warning in its log
QUIET = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'
NOISY = '#warning "jitflow integrity test"\n' + QUIET


def _intact_after(code: str) -> None:
    proc = run_python(textwrap.dedent(code) + "\n" + textwrap.dedent(INTACT))
    assert proc.stdout.strip().endswith("intact"), proc.stdout + proc.stderr


@pytest.mark.parametrize("source", [QUIET, NOISY], ids=["empty-log", "log"])
def test_nvrtc_outputs_are_copied_from_buffers_of_our_own(source):
    pytest.importorskip("cuda.bindings.nvrtc")
    _intact_after(f"""
        from jitflow.toolchain.cuda import nvrtc
        from jitflow.toolchain.cuda.cuda_flags import CudaFlags
        quiet = CudaFlags(ptxas=())          # no ptxas -v: nothing to say about a clean kernel
        cubin, ptx, log = nvrtc._compile_one({source!r}, "sm_90", [], None, flags=quiet)
        assert cubin[:4] == b"\\x7fELF" and b".entry k" in ptx
        assert (log == "") == {source is QUIET}, repr(log)
        fatbin, logs = nvrtc.compile_fatbin({source!r}, ["sm_80", "sm_90"], flags=quiet)
        assert fatbin and "sm_90" in logs
        nvrtc.compile_fatbin({source!r}, ["sm_90"])     # the default flags: ptxas reports registers
    """)


def test_cuda_build_export_and_inspect(cache_dir, tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    _intact_after(f"""
        import jitflow, kernels
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"])
        exe.build()
        exe.export_library({str(tmp_path / "v.so")!r})
        rep = exe.inspect()
        assert rep.ptx
    """)


def test_nvcc_device_compile(cache_dir):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed here")
    _intact_after("""
        import jitflow, kernels
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cuda_compiler="nvcc").build()
    """)


def test_cpu_jit_and_parallel_builds(cache_dir):
    _intact_after("""
        import numpy as np, tvm, jitflow, kernels
        exe = jitflow.compile(kernels.vecadd(), "c")
        a = tvm.runtime.tensor(np.ones(1024, "float32"))
        c = tvm.runtime.tensor(np.zeros(1024, "float32"))
        exe["main"](a, a, c)
        assert (c.numpy() == 2).all()
        results = jitflow.build_all([jitflow.compile(kernels.vecadd_cuda(threads=t), "cuda", arch="sm_90")
                                     for t in (64, 256)] + [jitflow.compile(kernels.axpb(3.0), "c")], jobs=2)
        assert all(r.ok for r in results), results
    """)


def test_relax_model_on_cuda(cache_dir):
    pytest.importorskip("cuda.bindings.nvrtc")
    _intact_after("""
        import jitflow, models
        jitflow.compile(models.mlp(), "cuda", arch="sm_90").build()
    """)


@pytest.mark.gpu
def test_trace_on_the_gpu(cache_dir):
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed: pip install 'jitflow[trace]'")
    _intact_after("""
        import torch, jitflow, kernels
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda")
        a = torch.ones(1024, device="cuda")
        c = torch.zeros(1024, device="cuda")
        trace = exe.trace("main", a, a, c, calls=2)
        assert trace.events
    """)
