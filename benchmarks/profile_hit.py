"""Where a cache hit's time goes, in a fresh process: cProfile of the span warm_start.py times,
jitflow.compile(...) to a callable function (exe["main"], or exe.vm(device)["main"] for a model).

    python benchmarks/profile_hit.py [--model vecadd|mlp] [--target c|cuda] [--arch sm_90] [--lines 30]

On CUDA the context is created first, as in warm_start.py (it costs every path the same).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vecadd", choices=["vecadd", "mlp"])
    parser.add_argument("--target", default="c", choices=["c", "cuda"])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--lines", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child:
        cmd = [sys.executable, __file__, "--model", args.model, "--target", args.target, "--arch", args.arch,
               "--lines", str(args.lines)]
        subprocess.run(cmd + ["--child"], check=True, capture_output=True)   # make sure the entry exists
        subprocess.run(cmd + ["--child"], check=True)
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import time

    import kernels
    import tvm

    import jitflow
    from jitflow.runtime import load

    arch = args.arch if args.target == "cuda" else None
    if args.model == "mlp":
        import models

        mod = models.mlp(batch=32, d_in=784, hidden=512, d_out=10)
    else:
        mod = kernels.vecadd_cuda() if args.target == "cuda" else kernels.vecadd()
    if args.target == "cuda":
        load.ensure_cuda_backend()
        tvm.runtime.empty((1,), "float32", tvm.cuda(0))
    device = tvm.cuda(0) if args.target == "cuda" else tvm.cpu(0)
    before = set(sys.modules)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    exe = jitflow.compile(mod, args.target, arch=arch)
    if args.model == "mlp":
        exe.vm(device)["main"]
    else:
        exe["main"]
    prof.disable()
    wall = time.perf_counter() - start
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(args.lines)
    stats.sort_stats("tottime").print_stats(args.lines // 2)
    imported = sorted(set(sys.modules) - before)
    print(f"{exe.build_info}\ncompile to callable: {wall * 1000:.1f} ms (profiled)\n"
          f"imported on the way ({len(imported)}): {' '.join(imported)}\n{out.getvalue()}")


if __name__ == "__main__":
    main()
