"""Tuning time end to end: MetaSchedule's tune_tir with jitflow's builder against its LocalBuilder, on
the same workload, trials, seed, cost model, search strategy and runner, one after the other.

    python benchmarks/tune.py                                    # CPU: 128^3 matmul, 64 trials, 2 workers
    python benchmarks/tune.py --trials 16 --workers 2 --cost-model random      # short (make bench)
    python benchmarks/tune.py --trials 512 --per-iter 64 --workers 16          # a 16-core machine
    python benchmarks/tune.py --cuda --trials 64 --workers 16                  # a CUDA matmul on the GPU
    python benchmarks/tune.py --same-candidates --rounds 3       # the build phase alone, both builders
                                                                 # on the same BuilderInputs
    python benchmarks/tune.py --same-candidates --work-dirs W/matmul128,W/conv2d_64x56   # candidates
                                                                 # tuned before (tuning_builds.py --tune)

Each builder gets one summary line: the whole tuning time, split into the build phase (the
builder's own time: MetaSchedule calls build() and waits), the run phase (the time it waits for the
runner's results) and search (the rest: the search strategy, the cost model, MetaSchedule's own
work); the candidates built and failed (each failure's reason counted: LocalBuilder's timeouts are
"timeout"), the candidates measured, and the best latency found. Then one line of ratios. jitflow
builds into a fresh cache folder (every candidate a miss). The first line names the machine, its
cores and the load average, which on a shared machine moves every figure. MetaSchedule's one-time
start-up in the process (importing TVM's tensor intrinsics, which its schedule rules need) is done
first and reported on its own line, so that it does not land in the first builder's search time.
"""
from __future__ import annotations

import argparse
import collections
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

#: MetaSchedule's run time for a candidate that failed to build or run (1e10 s)
FAILED_RUN = 1e9


def _timed_builder(ms, inner, clock: dict):
    """`inner`, with its time added to clock['build'] and each result counted (built, failed, why)."""
    from tvm.ir.utils import derived_object

    @derived_object
    class TimedBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            start = time.perf_counter()
            try:
                results = inner.build(build_inputs)
            finally:
                clock["build"] += time.perf_counter() - start
            for result in results:
                if result.error_msg:
                    clock["failed"][_reason(result.error_msg)] += 1
                else:
                    clock["built"] += 1
            return results

    return TimedBuilder()


def _reason(message: str) -> str:
    """A build error's reason, short: "timeout", else the error's last line (a traceback's own)."""
    if "timeout" in message.lower() or "timed out" in message.lower():
        return "timeout"
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no message")[:120]


def _timed_runner(ms, inner, clock: dict):
    """`inner`, with the time spent waiting for its results added to clock['run']."""
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


def _builder(ms, name: str, workers: int, cache: str, timeout: float):
    if name == "local":
        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout)
    from jitflow.meta_schedule import Builder

    return Builder(jobs=workers, cache_dir=cache, timeout_s=timeout)


def _target(args):
    import tvm

    if args.cuda:
        return tvm.target.Target({"kind": "cuda", "arch": args.arch, "max_threads_per_block": 1024,
                                  "max_shared_memory_per_block": 49152},
                                 host={"kind": "llvm", "num-cores": args.workers})
    return tvm.target.Target({"kind": "llvm", "num-cores": args.workers})


def tune_once(name: str, args) -> dict:
    """One tune_tir with builder `name` ("jitflow" or "local"): its clock and counts."""
    from tvm.s_tir import meta_schedule as ms

    import kernels

    clock = {"build": 0.0, "run": 0.0, "built": 0, "failed": collections.Counter()}
    cache = tempfile.mkdtemp(prefix="tune-bench-cache-")
    work = tempfile.mkdtemp(prefix=f"tune-bench-{name}-")
    target = _target(args)
    builder = _timed_builder(ms, _builder(ms, name, args.workers, cache, args.timeout), clock)
    runner = _timed_runner(ms, ms.runner.LocalRunner(), clock)
    workload = kernels.matmul(args.n)["main"]
    start = time.perf_counter()
    db = ms.tune_tir(workload, target, work, max_trials_global=args.trials, num_trials_per_iter=args.per_iter,
                     builder=builder, runner=runner, seed=args.seed, cost_model=args.cost_model,
                     strategy=args.strategy)
    clock["total"] = time.perf_counter() - start
    clock["search"] = clock["total"] - clock["build"] - clock["run"]
    means = [sum(float(s) for s in r.run_secs) / len(r.run_secs) for r in db.get_all_tuning_records() if r.run_secs]
    measured = [m for m in means if m < FAILED_RUN]
    clock["measured"], clock["best"], clock["work"] = len(measured), min(measured, default=None), work
    shutil.rmtree(cache, ignore_errors=True)
    return clock


def summary(name: str, c: dict, trials: int) -> str:
    """One line: the builder's total, build, run and search time, candidates, and the best latency."""
    label = "LocalBuilder" if name == "local" else "jitflow builder"
    failed = sum(c["failed"].values())
    why = "; ".join(f"{n} {reason}" for reason, n in c["failed"].most_common(3))
    best = f"{1e6 * c['best']:.1f} us" if c["best"] is not None else "none (no candidate measured)"
    return (f"{label}: {trials} trials, total {c['total']:.1f} s = build {c['build']:.1f} s + run {c['run']:.1f} s "
            f"+ search {c['search']:.1f} s; {c['built'] + failed} candidates: {c['built']} built, {failed} failed"
            + (f" ({why})" if why else "") + f", {c['measured']} measured; best {best}")


def same_candidates(args) -> None:
    """The build phase alone: one tuning run's candidates built by each builder in turn."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock  # noqa: F401  (as LocalBuilder imports it)

    if args.work_dirs:                          # candidates tuned before (benchmarks/tuning_builds.py --tune)
        folders = args.work_dirs.split(",")
    else:                                       # the candidates of one tuning run, now
        folders = [tune_once("jitflow", args)["work"]]
    target = _target(args)
    inputs = [ms.builder.BuilderInput(r.as_measure_candidate().sch.mod, target)
              for folder in folders for r in ms.database.JSONDatabase(work_dir=folder).get_all_tuning_records()]
    best: dict[str, float] = {}
    for r in range(args.rounds):
        for name in args.builders.split(","):
            builder = _builder(ms, name, args.workers, tempfile.mkdtemp(prefix="tune-bench-cache-"), args.timeout)
            start = time.perf_counter()
            results = builder.build(inputs)
            seconds = time.perf_counter() - start
            reasons = collections.Counter(_reason(x.error_msg) for x in results if x.error_msg)
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"round {r + 1}: {name} builder, {len(inputs)} candidates, {args.workers} workers: {seconds:.2f} s "
                  f"({1000 * seconds / len(inputs):.1f} ms each, {sum(reasons.values())} failed"
                  + "".join(f"; {n} {why}" for why, n in reasons.most_common(3)) + ")", flush=True)
            for x in results:
                if x.artifact_path:
                    shutil.rmtree(os.path.dirname(x.artifact_path), ignore_errors=True)
    if "local" in best and "jitflow" in best:
        print(f"build phase, minimum of {args.rounds}: LocalBuilder {best['local']:.2f} s, jitflow {best['jitflow']:.2f} s: "
              f"{best['jitflow'] / best['local']:.2f} of LocalBuilder's time")


def machine(args) -> str:
    """The machine in words: CPU model, cores, and the GPU for --cuda."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores"
    if args.cuda:
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20).stdout.strip().splitlines()
            text += f", {gpu[0]}" if gpu else ", no GPU listed by nvidia-smi"
        except (OSError, subprocess.SubprocessError):
            text += ", nvidia-smi not found"
    return text


def _check_cuda(args) -> None:
    """--cuda needs a GPU (LocalRunner times the kernels on it); the arch defaults to the visible GPU's."""
    from jitflow.targets import normalize_arch, visible_gpu_arch

    found = visible_gpu_arch()
    if found is None:
        raise SystemExit("tune.py --cuda: no CUDA GPU is visible here, and LocalRunner times each candidate on "
                         "one: run it on a GPU machine (or leave out --cuda for the CPU)")
    args.arch = normalize_arch(args.arch or found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=64, help="num_trials_per_iter")
    parser.add_argument("--workers", "--jobs", dest="workers", type=int, default=os.cpu_count() or 1,
                        help="build workers, both builders (default one per core); also the target's num-cores")
    parser.add_argument("--n", type=int, default=128, help="the matmul's size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cost-model", default="xgb", help="xgb (MetaSchedule's default) or random")
    parser.add_argument("--strategy", default="evolutionary", help="evolutionary (the default) or replay-trace")
    parser.add_argument("--builders", default="jitflow,local", help="which builders, in this order")
    parser.add_argument("--cuda", action="store_true", help="a CUDA matmul, measured on this machine's GPU")
    parser.add_argument("--arch", default=None, help="with --cuda: the arch (default the visible GPU's)")
    parser.add_argument("--same-candidates", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work-dirs", default="",
                        help="with --same-candidates: build the candidates of these MetaSchedule work folders "
                             "(comma-separated) instead of tuning first")
    parser.add_argument("--timeout", type=float, default=30.0, help="each builder's per-candidate timeout (s)")
    args = parser.parse_args()
    os.environ["JITFLOW_PROGRESS"] = "0"
    if args.cuda:
        _check_cuda(args)
    kind = f"CUDA ({args.arch})" if args.cuda else "CPU"
    if args.same_candidates and args.work_dirs:
        what = f"{kind} candidates of {args.work_dirs.count(',') + 1} work folders, {args.workers} build workers"
    else:
        what = (f"{kind} tune_tir of a {args.n}^3 float32 matmul: {args.trials} trials ({args.per_iter} a round), "
                f"{args.workers} build workers, seed {args.seed}, cost model {args.cost_model}, {args.strategy} "
                "search, LocalRunner")
    print(f"{what}; {machine(args)}; load average {os.getloadavg()[0]:.1f}", flush=True)
    start = time.perf_counter()
    import tvm.s_tir.tensor_intrin  # noqa: F401  (MetaSchedule's rules import them once per process)

    print(f"MetaSchedule's start-up, TVM's tensor intrinsics imported once: {time.perf_counter() - start:.1f} s, "
          "left out of both builders' figures", flush=True)
    if args.same_candidates:
        same_candidates(args)
        return
    clocks = {}
    for name in args.builders.split(","):
        try:
            clocks[name] = tune_once(name, args)
        except Exception as exc:  # noqa: BLE001 - one builder's failure does not hide the other's figures
            print(f"{name} builder: the tuning run failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                  flush=True)
            continue
        print(summary(name, clocks[name], args.trials), flush=True)
    if "local" in clocks and "jitflow" in clocks:
        ours, theirs = clocks["jitflow"], clocks["local"]
        print(f"jitflow / LocalBuilder: total {ours['total'] / theirs['total']:.2f}x, build phase "
              f"{ours['build'] / max(theirs['build'], 1e-9):.2f}x; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
