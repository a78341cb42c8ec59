"""What the CUDA floor and the portable preset cost.

    python benchmarks/ptx_jit.py size                      # here: fatbin size, portable vs one arch
    python benchmarks/ptx_jit.py load .gpu-artifacts       # on a GPU: first load + first call, PTX vs SASS

`load` runs each library in fresh processes (median of --runs) and times jitflow.load, the first call
(where TVM's CUDA module is loaded: the driver JIT-compiles PTX then) and the synchronize. The
driver keeps JIT results in its compute cache (~/.nv/ComputeCache): runs are timed with the cache
off (CUDA_CACHE_DISABLE=1, every process JIT-compiles) and on (after the first process).
Libraries: matmul_sm80.so (on an sm_90 GPU: PTX only) and matmul_sm90.so (matching SASS), from
tests/gpu_artifacts.py.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from fresh_process import run  # noqa: E402

CHILD = """
    import json, time, torch, tvm
    import jitflow
    a = torch.rand(256, 256, device="cuda"); b = torch.rand(256, 256, device="cuda")
    c = torch.empty(256, 256, device="cuda"); torch.cuda.synchronize()
    t0 = time.perf_counter()
    m = jitflow.load({path!r})
    f = m["main"]
    t1 = time.perf_counter()
    f(a, b, c); torch.cuda.synchronize()
    t2 = time.perf_counter()
    f(a, b, c); torch.cuda.synchronize()
    t3 = time.perf_counter()
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    print(json.dumps({{"load": t1 - t0, "first_call": t2 - t1, "second_call": t3 - t2}}))
"""


def size() -> None:
    import kernels

    import jitflow
    from jitflow.report import inspect_library

    with tempfile.TemporaryDirectory() as tmp:
        for name, make in [("vecadd", kernels.vecadd_cuda), ("matmul_shared", kernels.matmul_shared)]:
            rows = []
            for arch in ("sm_90", ["sm_80", "sm_90"], "portable"):
                exe = jitflow.compile(make(), "cuda", arch=arch, cache=False)
                rep = inspect_library(exe.export_library(Path(tmp) / f"{name}.so"))
                total = sum(e.size for e in rep.fatbin)
                entries = ", ".join(f"{e.kind} {e.arch} {e.size}" for e in rep.fatbin)
                rows.append((", ".join(exe.target.archs), total, rep.library.size, entries))
            base = rows[0][1]
            for archs, total, lib, entries in rows:
                print(f"{name} [{archs}]: fatbin {total} B ({total / base:.1f}x one arch), library {lib} B; {entries}")


def load(folder: Path, runs: int) -> None:
    import torch

    major, minor = torch.cuda.get_device_capability()
    print(f"GPU {torch.cuda.get_device_name()} (sm_{major}{minor})")
    for cache in ("off", "on"):
        for lib in ("matmul_sm80.so", "matmul_sm90.so"):
            env = dict(os.environ, CUDA_CACHE_DISABLE="1" if cache == "off" else "0")
            with tempfile.TemporaryDirectory() as cache_dir:
                env["CUDA_CACHE_PATH"] = cache_dir
                if cache == "on":
                    run(CHILD.format(path=str(folder / lib)), env, lib)   # fills the cache
                rows = [run(CHILD.format(path=str(folder / lib)), env, lib) for _ in range(runs)]
            med = {k: statistics.median(r[k] for r in rows) * 1000 for k in ("load", "first_call", "second_call")}
            print(f"{lib:16s} JIT cache {cache:3s}: load {med['load']:.1f} ms, first call {med['first_call']:.1f} ms, "
                  f"second call {med['second_call']:.2f} ms (median of {runs} fresh processes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["size", "load"])
    parser.add_argument("folder", nargs="?", default=".gpu-artifacts")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    size() if args.what == "size" else load(Path(args.folder), args.runs)


if __name__ == "__main__":
    main()
