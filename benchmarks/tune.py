"""Where a tuning run's time goes: build, run (measuring), search (everything else: the search
strategy, the cost model, MetaSchedule's own work), with MetaSchedule's default LocalBuilder and
with jitflow.meta_schedule.Builder, over the same task, trials and seed, in one run.

    python benchmarks/tune.py [--trials 64] [--per-iter 64] [--jobs 2] [--n 128] [--builders local,jitflow]
    python benchmarks/tune.py --trials 512 --jobs 16            # the 16-core machine
    python benchmarks/tune.py --same-candidates                 # the build phase alone, both builders
                                                                # on the same BuilderInputs, interleaved

The build phase is the builders' own time (MetaSchedule calls build() and waits); the run phase is
the time the scheduler waits for the runner's results; search is the rest of the wall time. jitflow
builds into a fresh cache folder (every candidate a miss). With --same-candidates the candidates of
one tuning run are built again by each builder in turn, --rounds times (jitflow under a fresh cache
salt each round), and the minimum per builder is kept: the issue's "build phase at most a quarter
of LocalBuilder's on the same BuilderInputs with equal workers".
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


def _timed(ms, inner, clock: dict):
    """`inner` builder and a runner, wrapped so that their time is added to clock['build'] / ['run']."""
    from tvm.ir.utils import derived_object

    @derived_object
    class TimedBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            start = time.perf_counter()
            try:
                return inner.build(build_inputs)
            finally:
                clock["build"] += time.perf_counter() - start
                clock["candidates"] += len(build_inputs)

    return TimedBuilder()


def _timed_runner(ms, inner, clock: dict):
    from tvm.ir.utils import derived_object

    @derived_object
    class TimedFuture(ms.runner.PyRunnerFuture):
        def __init__(self, future):
            super().__init__()
            self.future = future

        def done(self):
            return self.future.done()

        def result(self):
            start = time.perf_counter()
            try:
                return self.future.result()
            finally:
                clock["run"] += time.perf_counter() - start

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        def run(self, runner_inputs):
            start = time.perf_counter()
            futures = inner.run(runner_inputs)
            clock["run"] += time.perf_counter() - start
            return [TimedFuture(f) for f in futures]

    return TimedRunner()


def _builder(ms, name: str, jobs: int, cache: str, timeout: float):
    if name == "local":
        return ms.builder.LocalBuilder(max_workers=jobs, timeout_sec=timeout)
    from jitflow.meta_schedule import Builder

    return Builder(jobs=jobs, cache_dir=cache, timeout_s=timeout)


def tune_once(name: str, args) -> dict:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    import kernels

    clock = {"build": 0.0, "run": 0.0, "candidates": 0}
    cache = tempfile.mkdtemp(prefix="tune-bench-cache-")
    work = tempfile.mkdtemp(prefix=f"tune-bench-{name}-")
    target = tvm.target.Target({"kind": "llvm", "num-cores": args.jobs})
    builder = _timed(ms, _builder(ms, name, args.jobs, cache, args.timeout), clock)
    runner = _timed_runner(ms, ms.runner.LocalRunner(), clock)
    start = time.perf_counter()
    db = ms.tune_tir(kernels.matmul(args.n)["main"], target, work, max_trials_global=args.trials,
                     num_trials_per_iter=args.per_iter, builder=builder, runner=runner, seed=args.seed,
                     cost_model=args.cost_model)
    clock["total"] = time.perf_counter() - start
    clock["search"] = clock["total"] - clock["build"] - clock["run"]
    best = ms.tir_integration.compile_tir(db, kernels.matmul(args.n)["main"], target)
    clock["work"] = work
    clock["best"] = None if best is None else min(
        (float(sum(r.run_secs) / len(r.run_secs)) for r in db.get_all_tuning_records() if r.run_secs), default=None)
    return clock


def same_candidates(args) -> None:
    """The build phase alone: one tuning run's candidates built by each builder in turn."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock  # noqa: F401  (as LocalBuilder imports it)

    clock = tune_once("jitflow", args)          # the candidates to build
    db = ms.database.JSONDatabase(work_dir=clock["work"])
    target = tvm.target.Target({"kind": "llvm", "num-cores": args.jobs})
    inputs = [ms.builder.BuilderInput(r.as_measure_candidate().sch.mod, target) for r in db.get_all_tuning_records()]
    best: dict[str, float] = {}
    for r in range(args.rounds):
        for name in args.builders.split(","):
            builder = _builder(ms, name, args.jobs, tempfile.mkdtemp(prefix="tune-bench-cache-"), args.timeout)
            start = time.perf_counter()
            results = builder.build(inputs)
            seconds = time.perf_counter() - start
            errors = [x.error_msg for x in results if x.error_msg]
            failed = len(errors)
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"round {r + 1}: {name} builder, {len(inputs)} candidates, {args.jobs} workers: {seconds:.2f} s "
                  f"({1000 * seconds / len(inputs):.1f} ms each, {failed} failed"
                  + (f"; the first: {errors[0].splitlines()[0][:160]}" if errors else "") + ")", flush=True)
            for x in results:
                if x.artifact_path:
                    import shutil

                    shutil.rmtree(os.path.dirname(x.artifact_path), ignore_errors=True)
    if "local" in best and "jitflow" in best:
        print(f"build phase, minimum of {args.rounds}: LocalBuilder {best['local']:.2f} s, jitflow {best['jitflow']:.2f} s: "
              f"{best['jitflow'] / best['local']:.2f} of LocalBuilder's time (goal at most 0.25)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=64, help="num_trials_per_iter")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build workers (both builders)")
    parser.add_argument("--n", type=int, default=128, help="the matmul's size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cost-model", default="xgb", help="xgb (MetaSchedule's default) or random")
    parser.add_argument("--builders", default="local,jitflow")
    parser.add_argument("--same-candidates", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=30.0, help="each builder's per-candidate timeout (s)")
    args = parser.parse_args()
    os.environ["JITFLOW_PROGRESS"] = "0"
    print(f"tuning a {args.n}^3 float32 matmul, {args.trials} trials, {args.jobs} workers, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if args.same_candidates:
        same_candidates(args)
        return
    for name in args.builders.split(","):
        c = tune_once(name, args)
        best = f"; best {1e6 * c['best']:.1f} us" if c["best"] else ""
        print(f"{name} builder: total {c['total']:.1f} s = build {c['build']:.1f} s "
              f"({1000 * c['build'] / max(c['candidates'], 1):.1f} ms per candidate) + run {c['run']:.1f} s "
              f"+ search {c['search']:.1f} s{best}", flush=True)


if __name__ == "__main__":
    main()
