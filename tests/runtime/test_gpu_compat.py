"""On a GPU, in a runtime-only TVM: the driver query, and a library built on a machine without a GPU
(tests/gpu_artifacts.py) that the GPU and driver cannot run, refused with jitflow's LoadError before
TVM's CUDA error. (Libraries that run through their PTX: test_gpu.py's prebuilt libraries.)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ROOT, run_python

RUNS_IN_RUNTIME_ONLY_TVM = True   # collected in a TVM without its compiler too (conftest.py)

pytestmark = pytest.mark.gpu
ARTIFACTS = Path(os.environ.get("JITFLOW_GPU_ARTIFACTS", ROOT / ".gpu-artifacts"))
needs_artifacts = pytest.mark.skipif(not (ARTIFACTS / "vecadd_sm80.so").is_file(),
                                     reason="no prebuilt artifacts (tests/gpu_artifacts.py)")


def _gpu():
    from jitflow.runtime.compat import DriverQuery

    gpu = DriverQuery().gpu(0)
    assert gpu is not None, "a GPU test ran where the driver reports no GPU"
    return gpu


def test_the_driver_query_sees_the_gpu_and_driver():
    gpu = _gpu()
    assert gpu.arch.startswith("sm_") and gpu.driver.major >= 13 and gpu.name


@needs_artifacts
def test_a_library_the_gpu_cannot_run_is_a_load_error():
    from jitflow.targets.cuda_floor import CudaVersion

    gpu = _gpu()
    if gpu.arch.startswith("sm_8") or gpu.driver >= CudaVersion(13, 5):
        pytest.skip(f"{gpu.arch} with CUDA {gpu.driver} can run this library")
    proc = run_python(f"""
        import jitflow
        from jitflow.errors import LoadError
        try:
            jitflow.load({str(ARTIFACTS / "vecadd_sm80_ptx95.so")!r})
        except LoadError as exc:
            print(exc)
        else:
            print("loaded")
    """, env={"TVM_USE_RUNTIME_LIB": "1"})
    text = proc.stdout
    assert "cannot run on GPU 0" in text, text
    for part in (gpu.arch, f"CUDA {gpu.driver}", "SASS for sm_80", "PTX ISA 9.5", "cuda_floor="):
        assert part in text, (part, text)
