"""Where a cache hit's time goes, in a fresh process: cProfile of exe.jit() (and vm() for a model).

    python benchmarks/profile_hit.py [--model vecadd|mlp] [--target c|cuda] [--arch sm_90]
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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child:
        cmd = [sys.executable, __file__, "--model", args.model, "--target", args.target, "--arch", args.arch]
        subprocess.run(cmd + ["--child"], check=True, capture_output=True)   # make sure the entry exists
        subprocess.run(cmd + ["--child"], check=True)
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import kernels

    import jitflow

    arch = args.arch if args.target == "cuda" else None
    if args.model == "mlp":
        import models

        mod = models.mlp(batch=32, d_in=784, hidden=512, d_out=10)
    else:
        mod = kernels.vecadd_cuda() if args.target == "cuda" else kernels.vecadd()
    exe = jitflow.compile(mod, args.target, arch=arch)
    prof = cProfile.Profile()
    prof.enable()
    if args.model == "mlp":
        exe.vm(args.target if args.target == "cuda" else "cpu")
    else:
        exe.jit()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(18)
    print(f"{exe.build_info}\n{out.getvalue()}")


if __name__ == "__main__":
    main()
