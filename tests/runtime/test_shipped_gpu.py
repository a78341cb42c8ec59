"""On a GPU: shipped libraries (tests/gpu_artifacts.py) in processes that never import `tvm`: a kernel on
torch's current stream, a model's load_vm, and the load-time and call-profile benchmarks run end to
end (their figures are printed, never asserted)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_python

RUNS_IN_RUNTIME_ONLY_TVM = True   # collected in a TVM without its compiler too (conftest.py)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not (Path(os.environ.get("JITFLOW_GPU_ARTIFACTS", ROOT / ".gpu-artifacts"))
                                      / "vecadd.so").is_file(), reason="no prebuilt artifacts (tests/gpu_artifacts.py)")]
torch = pytest.importorskip("torch")
ARTIFACTS = Path(os.environ.get("JITFLOW_GPU_ARTIFACTS", ROOT / ".gpu-artifacts"))


def test_a_shipped_kernel_runs_on_torchs_stream_without_tvm():
    proc = run_python(f"""
        import sys, torch, jitflow
        f = jitflow.load({str(ARTIFACTS / "vecadd.so")!r})["main"]
        side = torch.cuda.Stream()
        a = torch.rand(1 << 10, device="cuda"); b = torch.rand(1 << 10, device="cuda")
        for _ in range(20):
            c = torch.empty(1 << 10, device="cuda")
            with torch.cuda.stream(side):
                a.add_(1.0)                 # queued on the side stream, then the kernel after it
                f(a, b, c)
                ok = torch.equal(c, a + b)  # torch's comparison on the same stream, after the kernel
            side.synchronize()
            assert ok
        print("tvm" in sys.modules, "libtvm_compiler" in open("/proc/self/maps").read())
    """)
    assert proc.stdout.split() == ["False", "False"]


def test_a_shipped_model_loads_on_the_gpu_without_tvm():
    proc = run_python(f"""
        import sys, numpy as np, torch, jitflow, models
        vm = jitflow.load_vm({str(ARTIFACTS / "mlp.so")!r}, "cuda")
        x = torch.linspace(-1, 1, 64, device="cuda").reshape(4, 16)
        y = vm["main"](x)
        expected = models.mlp_reference(x.cpu().numpy(), models.mlp_weights())
        np.testing.assert_allclose(torch.from_dlpack(y).cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
        # torch in, torch out (tvm-ffi's DLPack exchange); otherwise a tensor with .numpy() (copied to the host)
        host = y.cpu().numpy() if isinstance(y, torch.Tensor) else y.numpy()
        np.testing.assert_allclose(host, expected, rtol=1e-4, atol=1e-4)
        print("tvm" in sys.modules)
    """)
    assert proc.stdout.split() == ["False"]


def _benchmark(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / args[0]), *args[1:]], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    sys.stdout.write(proc.stdout)        # the figures, for the run's log (-s)
    return proc.stdout


def test_load_and_first_call_against_the_floor():
    out = _benchmark("load_time.py", str(ARTIFACTS / "vecadd.so"), str(ARTIFACTS / "mlp.so"), "--runs", "3",
                     "--input", "4,16")
    assert "floor:" in out and "ratio" in out and "tvm imported: False" in out


def test_the_call_profile():
    out = _benchmark("call_overhead.py", str(ARTIFACTS / "vecadd.so"), "--calls", "2000", "--rounds", "3")
    assert "jitflow kernel (shipped .so)" in out and "cuLaunchKernel" in out and "by difference" in out
