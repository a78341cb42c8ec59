"""Tuning time end to end: MetaSchedule's tune_tir with each builder (jitflow's Builder, LocalBuilder)
and each runner (jitflow's Runner, LocalRunner), on the same workload, trials, seed, cost model,
search strategy and evaluator, one after the other.

    python benchmarks/tune.py                                    # CPU: 128^3 matmul, 64 trials, 2 workers
    python benchmarks/tune.py --trials 16 --workers 2 --cost-model random      # short (make bench)
    python benchmarks/tune.py --trials 512 --per-iter 64 --workers 16          # a 16-core machine
    python benchmarks/tune.py --cuda --trials 64 --workers 16                  # a CUDA matmul on the GPU
    python benchmarks/tune.py --cuda --builders jitflow --runners jitflow:1,jitflow   # one GPU, then all
    python benchmarks/tune.py --compare-runners --rounds 3       # the same candidates timed by both runners
    python benchmarks/tune.py --same-candidates --rounds 3       # the build phase alone, both builders
                                                                 # on the same BuilderInputs
    python benchmarks/tune.py --same-candidates --work-dirs W/matmul128,W/conv2d_64x56   # candidates
                                                                 # tuned before (tuning_builds.py --tune)

Runners: "jitflow" (Runner, every visible GPU), "jitflow:N" (Runner on the first N GPUs), "local"
(LocalRunner). Each builder and runner gets one summary line: the whole tuning time, split into the
build phase (the builder's own time: MetaSchedule calls build() and waits), the run phase (the time
it waits for the runner's results) and search (the rest: the search strategy, the cost model,
MetaSchedule's own work); the run phase per candidate beside the evaluator's own time (the
time_evaluator calls, timed in the measuring process: with several GPUs, their sum over the GPUs
used) and the run phase over it (the goal on the GPU: 1.3x at most); the candidates built and failed
(each failure's reason counted: LocalBuilder's timeouts are "timeout"), the candidates measured, and
the best latency found. Then lines of ratios. jitflow builds into a fresh cache folder (every
candidate a miss). numpy's random state is seeded with the seed (jitflow.meta_schedule.seeded) and
"random" is RandomModel(seed=...), so every pairing draws the same first round. The runners' processes
are started before the clock (LocalRunner's constructor waits for its worker; Runner.wait_ready()).
The first line names the machine, its cores and the load average, which on a shared machine moves
every figure. MetaSchedule's one-time start-up in the process (importing TVM's tensor intrinsics,
which its schedule rules need) is done first and reported on its own line, so that it does not land
in the first builder's search time.
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

from tune_harness import FAILED_RUN, RunnerUnderTest, reason, timed_builder, timed_runner  # noqa: E402

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


def _evaluator_config(ms, args):
    return ms.runner.EvaluatorConfig(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms)


def tune_once(name: str, args, runner_name: str = "local") -> dict:
    """One tune_tir with builder `name` ("jitflow" or "local") and runner `runner_name`: its clock and counts."""
    from tvm.s_tir import meta_schedule as ms

    import kernels
    from jitflow.meta_schedule import seeded

    clock = {"build": 0.0, "run": 0.0, "built": 0, "failed": collections.Counter()}
    cache = tempfile.mkdtemp(prefix="tune-bench-cache-")
    work = tempfile.mkdtemp(prefix=f"tune-bench-{name}-")
    target = _target(args)
    builder = timed_builder(ms, _builder(ms, name, args.workers, cache, args.timeout), clock)
    under_test = RunnerUnderTest(ms, runner_name, _evaluator_config(ms, args))
    runner = timed_runner(ms, under_test.runner, clock)
    cost_model = ms.cost_model.RandomModel(seed=args.seed) if args.cost_model == "random" else args.cost_model
    workload = kernels.matmul(args.n)["main"]
    start = time.perf_counter()
    with seeded(args.seed):
        db = ms.tune_tir(workload, target, work, max_trials_global=args.trials, num_trials_per_iter=args.per_iter,
                         builder=builder, runner=runner, seed=args.seed, cost_model=cost_model,
                         strategy=args.strategy, num_tuning_cores=args.tuning_cores)
    clock["total"] = time.perf_counter() - start
    clock["search"] = clock["total"] - clock["build"] - clock["run"]
    clock["evaluator"], clock["devices"], clock["runner"] = (under_test.evaluator_seconds(), under_test.devices,
                                                             under_test.label)
    under_test.close()
    means = [sum(float(s) for s in r.run_secs) / len(r.run_secs) for r in db.get_all_tuning_records() if r.run_secs]
    measured = [m for m in means if m < FAILED_RUN]
    clock["measured"], clock["best"], clock["work"] = len(measured), min(measured, default=None), work
    shutil.rmtree(cache, ignore_errors=True)
    return clock


def summary(name: str, c: dict, trials: int) -> str:
    """One line: the builder's and runner's total, build, run and search time, the run phase against the
    evaluator's own time, candidates, and the best latency."""
    label = "LocalBuilder" if name == "local" else "jitflow builder"
    failed = sum(c["failed"].values())
    why = "; ".join(f"{n} {reason}" for reason, n in c["failed"].most_common(3))
    best = f"{1e6 * c['best']:.1f} us" if c["best"] is not None else "none (no candidate measured)"
    timed = max(c["measured"], 1)
    own = c["evaluator"] / c["devices"]          # the evaluator's time as the wall clock sees it
    ratio = f"{c['run'] / own:.2f}x of it" if own > 0 else "no evaluator time"
    return (f"{label} x {c['runner']}: {trials} trials, total {c['total']:.1f} s = build {c['build']:.1f} s + run "
            f"{c['run']:.1f} s + search {c['search']:.1f} s; run phase {1000 * c['run'] / timed:.0f} ms a candidate, "
            f"the evaluator's own {1000 * own / timed:.0f} ms ({ratio}, overhead {1000 * (c['run'] - own) / timed:.0f} "
            f"ms a candidate); {c['built'] + failed} candidates: {c['built']} built, {failed} failed"
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
            reasons = collections.Counter(reason(x.error_msg) for x in results if x.error_msg)
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


def compare_runners(args) -> None:
    """The candidates of one tuning run, built once, timed by each runner in turn (rounds interleaved):
    the per-candidate ratio of their times and of the best latencies (the same numbers, within noise)."""
    from tvm.s_tir import meta_schedule as ms

    folder = tune_once("jitflow", args, args.runners.split(",")[0])["work"]
    target = _target(args)
    records = ms.database.JSONDatabase(work_dir=folder).get_all_tuning_records()
    candidates = [r.as_measure_candidate() for r in records]
    cache = tempfile.mkdtemp(prefix="tune-bench-cache-")
    built = _builder(ms, "jitflow", args.workers, cache, args.timeout).build(
        [ms.builder.BuilderInput(c.sch.mod, target) for c in candidates])
    kind = "cuda" if args.cuda else "cpu"          # the device type MetaSchedule hands its runner
    inputs = [ms.runner.RunnerInput(b.artifact_path, kind, c.args_info) for b, c in zip(built, candidates)
              if b.error_msg is None]
    names = args.runners.split(",")
    times: dict[str, list[list[float]]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            under_test = RunnerUnderTest(ms, name, _evaluator_config(ms, args))
            start = time.perf_counter()
            results = [f.result() for f in under_test.runner.run(inputs)]
            seconds = time.perf_counter() - start
            means = [sum(float(x) for x in res.run_secs) / len(res.run_secs) if res.run_secs else float("nan")
                     for res in results]
            times[name].append(means)
            print(f"round {r + 1}: {under_test.label}, {len(inputs)} candidates: {seconds:.2f} s, evaluator "
                  f"{under_test.evaluator_seconds():.2f} s; best {1e6 * min(means):.1f} us; "
                  f"{sum(1 for res in results if res.error_msg)} failed", flush=True)
            under_test.close()
    if len(names) == 2:
        import statistics

        a, b = ([min(col) for col in zip(*times[n])] for n in names)        # each candidate's best over rounds
        ratios = sorted(x / y for x, y in zip(a, b) if x == x and y == y and y > 0)
        if not ratios:
            print(f"{names[0]} / {names[1]}: no candidate was timed by both (see the failures above)")
        else:
            print(f"{names[0]} / {names[1]}, the same {len(ratios)} candidates (each its best of {args.rounds} rounds): "
                  f"median {statistics.median(ratios):.3f}x, from {ratios[0]:.3f}x to {ratios[-1]:.3f}x; best latency "
                  f"{1e6 * min(a):.1f} us against {1e6 * min(b):.1f} us: {min(a) / min(b):.3f}x")
    for b in built:
        if b.artifact_path:
            shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
    for path in (cache, folder):
        shutil.rmtree(path, ignore_errors=True)


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
    parser.add_argument("--runners", default="jitflow,local",
                        help="which runners, in this order: jitflow (every GPU), jitflow:N (the first N), local")
    parser.add_argument("--compare-runners", action="store_true",
                        help="the candidates of one tuning timed by each of --runners")
    parser.add_argument("--tuning-cores", type=int, default=1, help="num_tuning_cores (1: the same draws each run)")
    parser.add_argument("--number", type=int, default=3, help="EvaluatorConfig.number (LocalRunner's default)")
    parser.add_argument("--repeat", type=int, default=1, help="EvaluatorConfig.repeat")
    parser.add_argument("--min-repeat-ms", type=int, default=100, help="EvaluatorConfig.min_repeat_ms")
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
                f"search, {args.tuning_cores} tuning core(s), runners {args.runners}, evaluator number {args.number} "
                f"repeat {args.repeat} min_repeat_ms {args.min_repeat_ms}")
    print(f"{what}; {machine(args)}; load average {os.getloadavg()[0]:.1f}", flush=True)
    start = time.perf_counter()
    import tvm.s_tir.tensor_intrin  # noqa: F401  (MetaSchedule's rules import them once per process)

    print(f"MetaSchedule's start-up, TVM's tensor intrinsics imported once: {time.perf_counter() - start:.1f} s, "
          "left out of both builders' figures", flush=True)
    if args.same_candidates:
        same_candidates(args)
        return
    if args.compare_runners:
        compare_runners(args)
        return
    clocks = {}
    for name in args.builders.split(","):
        for runner in args.runners.split(","):
            try:
                clocks[name, runner] = tune_once(name, args, runner)
            except Exception as exc:  # noqa: BLE001 - one pairing's failure does not hide the others' figures
                print(f"{name} builder x {runner} runner: the tuning run failed: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:300]}", flush=True)
                continue
            print(summary(name, clocks[name, runner], args.trials), flush=True)
            shutil.rmtree(clocks[name, runner]["work"], ignore_errors=True)
    ratios(clocks, args)


def ratios(clocks: dict, args) -> None:
    """Lines of ratios: jitflow's builder over LocalBuilder (per runner), each runner over the first (per builder)."""
    runners, builders = args.runners.split(","), args.builders.split(",")
    for runner in runners:
        if ("local", runner) in clocks and ("jitflow", runner) in clocks:
            ours, theirs = clocks["jitflow", runner], clocks["local", runner]
            print(f"jitflow / LocalBuilder ({ours['runner']}): total {ours['total'] / theirs['total']:.2f}x, "
                  f"build phase {ours['build'] / max(theirs['build'], 1e-9):.2f}x")
    for builder in builders:
        first = clocks.get((builder, runners[0]))
        for runner in runners[1:]:
            other = clocks.get((builder, runner))
            if first is None or other is None:
                continue
            best = (f"{first['best'] / other['best']:.3f}x" if first["best"] and other["best"] else "not measured")
            print(f"{first['runner']} / {other['runner']} ({builder} builder): run phase "
                  f"{first['run'] / max(other['run'], 1e-9):.2f}x, total {first['total'] / other['total']:.2f}x, "
                  f"best latency {best}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
