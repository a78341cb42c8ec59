"""Build the libraries that the GPU tests load in a runtime-only install (run where TVM's compiler is).

    python tests/gpu_artifacts.py .gpu-artifacts
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import kernels  # noqa: E402
import models  # noqa: E402

import jitflow  # noqa: E402

ARTIFACTS = {
    "vecadd.so": lambda: jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"]),
    "matmul_shared.so": lambda: jitflow.compile(kernels.matmul_shared(), "cuda", arch="sm_90"),
    "mlp.so": lambda: jitflow.compile(models.mlp(), "cuda", arch=["sm_80", "sm_90"]),
    # CUDA floor (tests/runtime/test_gpu_compat.py, benchmarks/ptx_jit.py): on an sm_90 GPU the sm_80 builds
    # run through their PTX (at the default floor's ISA), the ptx95 one cannot on a driver older than 13.5
    "vecadd_sm80.so": lambda: jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80"),
    "vecadd_sm80_ptx95.so": lambda: jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor="13.5"),
    "matmul_sm80.so": lambda: jitflow.compile(kernels.matmul_shared(), "cuda", arch="sm_80"),
    "matmul_sm90.so": lambda: jitflow.compile(kernels.matmul_shared(), "cuda", arch="sm_90"),
    "matmul_portable.so": lambda: jitflow.compile(kernels.matmul_shared(), "cuda", arch="portable"),
}


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, make in ARTIFACTS.items():
        exe = make()
        exe.export_library(folder / name)
        print(f"{name}: {exe.build_info}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
