"""Every candidate of a tuning database, jitflow's build against TVM's own (what MetaSchedule's
LocalBuilder does: tvm.compile(llvm) and an export as a .tar of objects), one after another in this
process: the build time of each and its stages, and with --run each library's run time against
TVM's. The summary gives the median run-time ratio and how many candidates run over 1.5x TVM's
time (the goal: median at most 1.05x, at most 1 candidate in 40 over 1.5x).

    python benchmarks/tuning_builds.py --work-dir tune-logs [--limit 64] [--runs 3] [--run]
    python benchmarks/tuning_builds.py --tune 64 [--work-dir tune-logs]   # tune a 128^3 matmul first
    python benchmarks/tuning_builds.py --tune 16 --workloads matmul128,conv2d_64x56,softmax_256x1024 --run
    python benchmarks/tuning_builds.py --work-dir tune-logs --plain --only 12,14 --run   # without the
                                                                      # large-function flags

With --workloads (names of benchmarks/cpu_workloads.py) each workload has its own database in
`<work-dir>/<name>`. Tuning uses jitflow's builder, MetaSchedule's default CPU search space (explicit
unrolling included) and the random cost model, so the candidates are the spread a search draws,
not only the good ones. Every jitflow build is under a fresh key (a cache salt per run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]


def _target() -> Any:
    import tvm

    return tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1})


def _tune(work: str, trials: int, mod: Any, seed: int) -> None:
    from tvm.s_tir import meta_schedule as ms

    from jitflow.meta_schedule import Builder

    ms.tune_tir(mod, _target(), work, max_trials_global=trials, num_trials_per_iter=min(trials, 16),
                builder=Builder(timeout_s=None), runner=ms.runner.LocalRunner(), cost_model="random",
                seed=seed)


def _workload(name: str, n: int) -> Any:
    """The IRModule of a workload name (cpu_workloads.py), or the n^3 matmul of tests/kernels.py."""
    if name == "matmul":
        import kernels

        return kernels.matmul(n)
    import cpu_workloads

    return cpu_workloads.module(name)


def _tvm_build(mod: Any) -> float:
    import tvm
    from tvm.support.tar import tar

    start = time.perf_counter()
    lib = tvm.compile(mod, target=_target())
    folder = tempfile.mkdtemp(prefix="tuning-builds-tvm-")
    lib.export_library(os.path.join(folder, "lib.tar"), fcompile=tar)
    return time.perf_counter() - start


def _jitflow_build(mod: Any, salt: str, timeout: float | None) -> tuple[float, Any]:
    import jitflow

    exe = jitflow.compile(mod, "c", cache_salt=salt)
    start = time.perf_counter()
    exe.build(timeout_s=timeout)
    return time.perf_counter() - start, exe


def _arguments(mod: Any) -> list[Any]:
    """Random tensors of the shapes and dtypes of main's buffer parameters."""
    import numpy as np
    import tvm

    func, rng, out = mod["main"], np.random.default_rng(0), []
    for param in func.params:
        buf = param.ty                                     # a buffer parameter's type: shape and dtype
        shape = [int(d) for d in buf.shape]
        out.append(tvm.runtime.tensor(rng.standard_normal(shape).astype(str(buf.dtype))))
    return out


def _run_times(ours: Any, theirs: Any, args: list[Any], calls: int) -> tuple[float, float]:
    """The best of `calls` calls of each, interleaved so that a change of load falls on both."""
    best = [float("inf"), float("inf")]
    ours(*args)
    theirs(*args)
    for _ in range(calls):
        for k, func in enumerate((ours, theirs)):
            start = time.perf_counter()
            func(*args)
            best[k] = min(best[k], time.perf_counter() - start)
    return best[0], best[1]


def _candidates(work: str, limit: int) -> list[Any]:
    from tvm.s_tir import meta_schedule as ms

    return ms.database.JSONDatabase(work_dir=work).get_all_tuning_records()[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=None, help="a MetaSchedule work folder (its JSON database)")
    parser.add_argument("--tune", type=int, default=0, help="tune this many trials per workload first")
    parser.add_argument("--workloads", default="matmul",
                        help="comma-separated: matmul (the --n matmul) or names of benchmarks/cpu_workloads.py")
    parser.add_argument("--seed", type=int, default=1, help="the tuning's seed")
    parser.add_argument("--limit", type=int, default=64, help="at most this many candidates per workload")
    parser.add_argument("--only", default="", help="comma-separated candidate numbers (as listed) to build")
    parser.add_argument("--runs", type=int, default=1, help="builds of each candidate (minimum kept)")
    parser.add_argument("--run", action="store_true", help="also time each library against TVM's")
    parser.add_argument("--calls", type=int, default=7, help="with --run: timed calls of each (best kept)")
    parser.add_argument("--plain", action="store_true", help="no large-function flags (what came before)")
    parser.add_argument("--large-flags", default=None, help="other flags for large functions, space-separated")
    parser.add_argument("--extra-flags", default=None, help="more clang flags for every host C piece, space-separated")
    parser.add_argument("--timeout", type=float, default=None, help="jitflow's timeout_s per build")
    parser.add_argument("--n", type=int, default=128, help="the matmul workload's size")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="tuning-builds-")
    os.environ.setdefault("JITFLOW_CACHE_DIR", tempfile.mkdtemp(prefix="tuning-builds-cache-"))
    os.environ["JITFLOW_PROGRESS"] = "0"
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    folders = {name: work if names == ["matmul"] else os.path.join(work, name) for name in names}
    for name in names:
        if args.tune:
            start = time.perf_counter()
            _tune(folders[name], args.tune, _workload(name, args.n), args.seed)
            print(f"tuned {name}: {args.tune} trials in {time.perf_counter() - start:.1f} s", flush=True)

    import tvm

    from jitflow.builder.host_c import compile as host_compile

    if args.plain:
        host_compile.LARGE_FUNCTION_FLAGS = ()
    elif args.large_flags is not None:
        host_compile.LARGE_FUNCTION_FLAGS = tuple(args.large_flags.split())
    if args.extra_flags:
        chosen, extra = host_compile.flags_for, tuple(args.extra_flags.split())
        host_compile.flags_for = lambda text: (*chosen(text), *extra)
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    records = [(name, r) for name in names for r in _candidates(folders[name], args.limit)]
    print(f"{len(records)} candidates from {work}; {os.cpu_count()} cores, TVM_NUM_THREADS="
          f"{os.environ.get('TVM_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}", flush=True)
    only = {int(x) for x in args.only.split(",") if x.strip()}
    build_ratios, run_ratios, stages, failed = [], [], {}, 0
    totals = [0.0, 0.0]
    for n, (name, record) in enumerate(records):
        if only and n not in only:
            continue
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(record.as_measure_candidate().sch.mod)
        tvm_s = min(_tvm_build(mod) for _ in range(args.runs))
        try:
            times = [_jitflow_build(mod, f"tuning-builds {n} {r} {time.time()}", args.timeout) for r in range(args.runs)]
        except Exception as exc:  # noqa: BLE001 - reported with the candidate
            failed += 1
            print(f"#{n} {name}: jitflow failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
            continue
        jit_s, exe = min(times, key=lambda t: t[0])
        for stage, seconds in exe.build_info.stages.items():
            stages[stage] = stages.get(stage, 0.0) + seconds
        totals[0] += jit_s
        totals[1] += tvm_s
        build_ratios.append(jit_s / tvm_s)
        size = Path(exe.build_info.library).parent.joinpath("src", "host.c").stat().st_size
        line = (f"#{n} {name}: host C {size / 1000:.0f} KB; build jitflow {jit_s:.2f} s, TVM {tvm_s:.2f} s, "
                f"{jit_s / tvm_s:.2f}x")
        if args.run:
            ours, theirs = _run_times(exe["main"], tvm.compile(mod, target=_target())["main"], _arguments(mod),
                                      args.calls)
            run_ratios.append(ours / theirs)
            line += f"; run {1e3 * ours:.3f} ms against TVM's {1e3 * theirs:.3f} ms ({ours / theirs:.2f}x)"
        print(line, flush=True)
    if not build_ratios:
        return
    split = ", ".join(f"{stage} {seconds:.1f} s ({seconds / sum(stages.values()):.0%})"
                      for stage, seconds in sorted(stages.items(), key=lambda s: -s[1]))
    print(f"builds: {len(build_ratios)} built, {failed} failed; jitflow {totals[0]:.1f} s against TVM's "
          f"{totals[1]:.1f} s ({totals[0] / totals[1]:.2f}x), median {statistics.median(build_ratios):.2f}x, "
          f"worst {max(build_ratios):.2f}x")
    print(f"jitflow's stages: {split}")
    if run_ratios:
        over = sum(r > 1.5 for r in run_ratios)
        print(f"run, jitflow / TVM over {len(run_ratios)} candidates: median {statistics.median(run_ratios):.2f}x, "
              f"geometric mean {statistics.geometric_mean(run_ratios):.2f}x, best {min(run_ratios):.2f}x, "
              f"worst {max(run_ratios):.2f}x; {over} over 1.5x (goal: median <= 1.05x, at most 1 in 40 over 1.5x); "
              f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
