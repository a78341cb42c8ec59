"""Microseconds per call from Python with torch tensors: jitflow's library vs TVM's LLVM-host build.

    python benchmarks/call_overhead.py [--arch sm_90] [--calls 20000]

Needs a GPU, torch and TVM with its compiler. Same kernel, same tensors, same run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]


def per_call_us(fns: dict, args, calls: int, rounds: int = 9) -> dict:
    """Median microseconds per call of each function, measured in interleaved rounds."""
    import torch

    samples: dict = {name: [] for name in fns}
    for f in fns.values():
        for _ in range(1000):
            f(*args)
    torch.cuda.synchronize()
    for _ in range(rounds):
        for name, f in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                f(*args)
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default=None)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    import kernels
    import torch
    import tvm

    import jitflow
    from jitflow.target import visible_gpu_arch

    arch = args.arch or visible_gpu_arch() or "sm_90"
    mod = kernels.vecadd_cuda()
    ours = jitflow.compile(mod, "cuda", arch=arch)["main"]
    llvm = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm")).jit()["main"]
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    rows = per_call_us({
        "jitflow (zig C host)": ours,
        "TVM LLVM host": llvm,
        "torch.add(out=)": lambda x, y, z: torch.add(x, y, out=z),
    }, (a, b, c), args.calls)
    torch.testing.assert_close(c, a + b)
    print(f"call overhead, vector add 1024 on {torch.cuda.get_device_name()} ({arch}), "
          f"median of 9 interleaved rounds of {args.calls} calls")
    for name, us in rows.items():
        print(f"{name:<24}{us:>8.2f} us/call")


if __name__ == "__main__":
    main()
