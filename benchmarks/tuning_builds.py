"""Build time of every candidate of a tuning database: jitflow against TVM's own build of it (what
MetaSchedule's LocalBuilder does: tvm.compile(llvm) and an export as a .tar of objects), one after
another in this process, with the ratio per candidate and the worst; and, with --run, each library's
run time against TVM's (the cost of the flags chosen by function size, LARGE_FUNCTION_FLAGS).

    python benchmarks/tuning_builds.py --work-dir tune-logs [--limit 64] [--runs 3] [--run]
    python benchmarks/tuning_builds.py --tune 64 [--work-dir tune-logs]   # tune a 128^3 matmul first
    python benchmarks/tuning_builds.py --work-dir tune-logs --plain --only 12,14 --run   # without the
                                                                      # large-function flags

Every jitflow build is under a fresh key (a cache salt per run). Huge candidates (explicit unrolling)
are listed with the size of their host C.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _tune(work: str, trials: int, n: int) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    import kernels
    from jitflow.meta_schedule import Builder

    ms.tune_tir(kernels.matmul(n), tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1}), work,
                max_trials_global=trials, builder=Builder(timeout_s=None), runner=ms.runner.LocalRunner(),
                cost_model="random")


def _tvm_build(mod, target) -> float:
    import tvm
    from tvm.support.tar import tar

    start = time.perf_counter()
    lib = tvm.compile(mod, target=target)
    folder = tempfile.mkdtemp(prefix="tuning-builds-tvm-")
    lib.export_library(os.path.join(folder, "lib.tar"), fcompile=tar)
    return time.perf_counter() - start


def _jitflow_build(mod, salt: str, timeout: float | None):
    import jitflow

    exe = jitflow.compile(mod, "c", cache_salt=salt)
    start = time.perf_counter()
    exe.build(timeout_s=timeout)
    return time.perf_counter() - start, exe


def _run_time(func, args, number: int = 5) -> float:
    best = float("inf")
    for _ in range(number):
        start = time.perf_counter()
        func(*args)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=None, help="a MetaSchedule work folder (its JSON database)")
    parser.add_argument("--tune", type=int, default=0, help="tune this many trials first (into --work-dir)")
    parser.add_argument("--limit", type=int, default=64, help="at most this many candidates")
    parser.add_argument("--only", default="", help="comma-separated candidate numbers (as listed) to build")
    parser.add_argument("--runs", type=int, default=1, help="builds of each candidate (minimum kept)")
    parser.add_argument("--run", action="store_true", help="also time each library (minimum of 5 calls)")
    parser.add_argument("--plain", action="store_true", help="no large-function flags (what came before)")
    parser.add_argument("--large-flags", default=None, help="other flags for large functions, space-separated")
    parser.add_argument("--timeout", type=float, default=None, help="jitflow's timeout_s per build")
    parser.add_argument("--n", type=int, default=128, help="the matmul's size (of --tune, and for --run)")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="tuning-builds-")
    os.environ.setdefault("JITFLOW_CACHE_DIR", tempfile.mkdtemp(prefix="tuning-builds-cache-"))
    os.environ["JITFLOW_PROGRESS"] = "0"
    if args.tune:
        _tune(work, args.tune, args.n)
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from jitflow.builder.host_c import compile as host_compile

    if args.plain:
        host_compile.LARGE_FUNCTION_FLAGS = ()
    elif args.large_flags is not None:
        host_compile.LARGE_FUNCTION_FLAGS = tuple(args.large_flags.split())
    database = ms.database.JSONDatabase(work_dir=work)
    records = database.get_all_tuning_records()[:args.limit]
    target = tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1})
    print(f"{len(records)} candidates from {work}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    worst = 0.0
    only = {int(x) for x in args.only.split(",") if x.strip()}
    for n, record in enumerate(records):
        if only and n not in only:
            continue
        mod = record.as_measure_candidate().sch.mod
        from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        tvm_s = min(_tvm_build(mod, target) for _ in range(args.runs))
        try:
            times = [_jitflow_build(mod, f"tuning-builds {n} {r} {time.time()}", args.timeout) for r in range(args.runs)]
        except Exception as exc:  # noqa: BLE001 - reported with the candidate
            print(f"#{n}: jitflow failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        jit_s, exe = min(times, key=lambda t: t[0])
        size = Path(exe.build_info.library).parent.joinpath("src", "host.c").stat().st_size
        worst = max(worst, jit_s / tvm_s)
        line = f"#{n}: host C {size / 1000:.0f} KB; jitflow {jit_s:.2f} s, TVM {tvm_s:.2f} s, {jit_s / tvm_s:.2f}x"
        if args.run:
            shape = (args.n, args.n)
            a, b = (tvm.runtime.tensor(np.random.rand(*shape).astype("float32")) for _ in range(2))
            c = tvm.runtime.tensor(np.zeros(shape, "float32"))
            ours = _run_time(exe["main"], (a, b, c))
            theirs = _run_time(tvm.compile(mod, target=target)["main"], (a, b, c))
            line += f"; run {1e3 * ours:.2f} ms against TVM's {1e3 * theirs:.2f} ms ({ours / theirs:.2f}x)"
        print(line, flush=True)
    print(f"worst build ratio: {worst:.2f}x TVM's build (goal 2x)")


if __name__ == "__main__":
    main()
