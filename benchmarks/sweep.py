"""Build throughput of a tuning sweep: N distinct candidates (small matmul kernels with different
tile sizes, parsed before timing), in one run, by

  - a fork process pool of `tvm.compile(mod, target="llvm")` + `export_library(path.so)` (TVM's path),
  - jitflow.build_all with local processes (jobs=J),
  - jitflow.build_all(backend="ray") on a local Ray cluster, at W = 1, 2, 4, ... builds at once,

each in candidates per second, with jitflow's ratio to the pool and Ray's scaling against one worker;
for the pool and the local processes also the CPU time per candidate (of every process involved,
compilers included), which other work on a shared machine changes less than the rates.

    python benchmarks/sweep.py [--candidates 64] [--jobs 1,2] [--ray-workers 1,2] [--no-ray] [--batch 8]
    python benchmarks/sweep.py --candidates 512 --jobs 1,16 --ray-workers 1,2,4,8    # a 16-core machine

`--batch B` (default 8; 0 for none) adds build_all(batch=B) at each process count: `--pairs`
unbatched and batched sweeps back to back, each pair's ratio read against the load average.

`--jobs` takes one or more process counts: the pool and build_all are timed at each (a row per
count), with build_all's scaling against its one-process rate where 1 is among them.

Every timed sweep builds keys never built before (a cache salt per sweep; the pool writes new
files), after a warm-up sweep of other keys that starts the workers and imports TVM in them. Each W
gets a local Ray cluster of W CPUs, whose workers share this process's cache folder on this
machine (nothing is copied back). A line says where one candidate's time goes (build
stages of jitflow in one process, and the CPU time of this process and of the compilers).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

N = 128
_MODS: list = []          # the parsed candidates, inherited by forked pool workers
_OUT = ""                 # the pool's output folder


def candidates(count: int) -> list:
    """`count` distinct schedules of an NxN matmul: i, j and k split by tile sizes."""
    import tvm

    import kernels

    tiles = [(ti, tj, tk) for tk in (1, 2, 4, 8, 16, 32, 64) for ti in (1, 2, 4, 8, 16, 32, 64)
             for tj in (1, 2, 4, 8, 16, 32, 64)]
    if count > len(tiles):
        raise SystemExit(f"at most {len(tiles)} candidates")
    mods = []
    for ti, tj, tk in tiles[:count]:
        sch = tvm.s_tir.Schedule(kernels.matmul(N))
        i, j, k = sch.get_loops(sch.get_sblock("C"))
        io, ii = sch.split(i, [None, ti])
        jo, ji = sch.split(j, [None, tj])
        ko, ki = sch.split(k, [None, tk])
        sch.reorder(io, jo, ko, ii, ki, ji)
        mods.append(sch.mod)
    return mods


def _tvm_build(index: int) -> int:
    import tvm

    tvm.compile(_MODS[index], target="llvm").export_library(os.path.join(_OUT, f"{index}.so"))
    return index


def _cpu() -> float:
    """CPU seconds of this process and of every process it started and waited for (workers, compilers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def tvm_pool(mods: list, jobs: int) -> tuple[float, float]:
    """Seconds for the fork pool of TVM's own path over `mods`, and the CPU seconds it took."""
    global _MODS, _OUT
    _MODS, _OUT = mods, tempfile.mkdtemp(prefix="sweep-tvm-")
    ctx = multiprocessing.get_context("fork")
    cpu, start = _cpu(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        list(pool.map(_tvm_build, range(len(mods))))
    return time.perf_counter() - start, _cpu() - cpu


def jitflow_sweep(mods: list, salt: str, jobs: int | None, backend: str, batch: int = 1) -> tuple[float, float]:
    """Seconds for build_all over `mods` under fresh keys (the salt), all built, and the CPU seconds
    of this process and its workers (a Ray cluster's workers are not counted)."""
    import jitflow

    exes = [jitflow.compile(m, "c", cache_salt=salt) for m in mods]
    cpu, start = _cpu(), time.perf_counter()
    results = jitflow.build_all(exes, jobs=jobs, backend=backend, **({"batch": batch} if backend == "local" else {}))
    seconds = time.perf_counter() - start
    bad = [r for r in results if not r.ok or r.outcome != "built"]
    if bad:
        raise SystemExit(f"{len(bad)} of {len(results)} candidates were not built: {bad[0]!r}")
    return seconds, _cpu() - cpu


def where_time_goes(mods: list) -> str:
    """One process building candidates one after another: its stages and CPU per candidate."""
    import jitflow

    def cpu() -> tuple[float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    jitflow.compile(mods[0], "c", cache_salt="profile warm-up").build()
    stages: dict[str, float] = {}
    before, start = cpu(), time.perf_counter()
    for m in mods:
        info = jitflow.compile(m, "c", cache_salt="profile").build()
        for name, seconds in info.stages.items():
            stages[name] = stages.get(name, 0.0) + seconds
    wall, after = time.perf_counter() - start, cpu()
    n = len(mods)
    shown = ", ".join(f"{name} {1000 * s / n:.1f}" for name, s in stages.items() if s / n >= 0.0005)
    python, zig = (1000 * (after[k] - before[k]) / n for k in (0, 1))
    return (f"one candidate in one process: {1000 * wall / n:.1f} ms ({shown} ms); CPU: python {python:.1f} ms, "
            f"zig (compile and link) {zig:.1f} ms")


def _counts(text: str, flag: str, parser: argparse.ArgumentParser) -> list[int]:
    """A comma-separated list of whole numbers of 1 or more (a cluster or pool of 0 would never build)."""
    try:
        counts = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"{flag} takes whole numbers of 1 or more, comma-separated, not {text!r}"
                     + (" (use --no-ray to leave Ray out)" if flag == "--ray-workers" else ""))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--jobs", default=",".join(dict.fromkeys(["1", str(os.cpu_count() or 1)])),
                        help="comma-separated process counts for the pool and build_all (default 1 and every core)")
    parser.add_argument("--ray-workers", default="1,2", help="comma-separated W for the Ray sweeps")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--batch", type=int, default=8,
                        help="build_all(batch=B) rows beside the unbatched ones, in pairs (0: none)")
    parser.add_argument("--pairs", type=int, default=3, help="paired unbatched/batched sweeps per job count")
    args = parser.parse_args()
    jobs = _counts(args.jobs, "--jobs", parser)
    workers = [] if args.no_ray else _counts(args.ray_workers, "--ray-workers", parser)
    os.environ.setdefault("JITFLOW_CACHE_DIR", tempfile.mkdtemp(prefix="sweep-cache-"))
    os.environ["JITFLOW_PROGRESS"] = "0"
    import tvm

    import jitflow

    mods = candidates(args.candidates)
    warm = candidates(8)
    tvm.compile(warm[0], target="llvm")                       # LLVM's first use, before forking
    jitflow.compile(warm[0], "c", cache_salt="warm-up").build()   # zig's probe and stubs, before forking
    print(f"sweep: {len(mods)} distinct {N}x{N} matmul candidates, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    rates: dict[int, float] = {}
    pool = 0.0
    for j in jobs:
        seconds, pool_cpu = tvm_pool(mods, j)
        pool, pool_cpu = len(mods) / seconds, 1000 * pool_cpu / len(mods)
        print(f"tvm.compile(llvm) + export_library, fork pool of {j}: {pool:.1f} candidates/s, "
              f"{pool_cpu:.1f} ms of CPU each", flush=True)
        seconds, local_cpu = jitflow_sweep(mods, f"local {j}", j, "local")
        local, local_cpu = len(mods) / seconds, 1000 * local_cpu / len(mods)
        rates[j] = local
        scaling = f"; {local / rates[1]:.2f}x one process = {local / rates[1] / j:.2f} x {j}" \
            if 1 in rates and j > 1 else ""
        print(f"jitflow build_all(jobs={j}): {local:.1f} candidates/s, {local / pool:.2f}x the pool; "
              f"{local_cpu:.1f} ms of CPU each, {pool_cpu / local_cpu:.2f}x less{scaling}", flush=True)
        if args.batch > 1:
            batched(mods, j, args.batch, args.pairs, pool)
    print(where_time_goes(mods[:16]), flush=True)       # before Ray's threads share this process
    if workers:
        ray_sweeps(mods, workers, pool)


def batched(mods: list, jobs: int, batch: int, pairs: int, pool: float) -> None:
    """Paired sweeps, unbatched then batched (the same machine, back to back): the ratio of each pair,
    with the load average, and build_all(batch=B)'s best rate against the pool."""
    ratios, cpu_ratios, best = [], [], 0.0
    for n in range(pairs):
        load = os.getloadavg()[0]
        one, one_cpu = jitflow_sweep(mods, f"pair {jobs} {n} one", jobs, "local")
        many, many_cpu = jitflow_sweep(mods, f"pair {jobs} {n} batch {batch}", jobs, "local", batch)
        ratios.append(one / many)
        cpu_ratios.append(one_cpu / many_cpu)
        best = max(best, len(mods) / many)
        print(f"  pair {n + 1} (load {load:.1f}): batch=1 {len(mods) / one:.1f}/s, {1000 * one_cpu / len(mods):.1f} ms "
              f"CPU each; batch={batch} {len(mods) / many:.1f}/s, {1000 * many_cpu / len(mods):.1f} ms CPU each",
              flush=True)
    ratios.sort()
    cpu_ratios.sort()
    print(f"jitflow build_all(jobs={jobs}, batch={batch}): {best:.1f} candidates/s, {best / pool:.2f}x the pool; "
          f"the median pair {ratios[len(ratios) // 2]:.2f}x the unbatched rate, "
          f"{cpu_ratios[len(cpu_ratios) // 2]:.2f}x less CPU", flush=True)


def ray_sweeps(mods: list, workers: list[int], pool: float) -> None:
    """One local cluster of W CPUs per W (its workers warmed up first), each timed over `mods`."""
    import ray

    # the workers import jitflow from this checkout, like this process
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "tests"),
                                                           os.environ.get("PYTHONPATH", "")) if p)
    one = None
    for w in workers:
        ray.init(num_cpus=w, include_dashboard=False, log_to_driver=False)
        try:
            jitflow_sweep(candidates(2 * w), f"ray warm-up {w}", None, "ray")
            rate = len(mods) / jitflow_sweep(mods, f"ray {w}", None, "ray")[0]
        finally:
            ray.shutdown()
        one = rate if w == 1 else one
        scaling = f", {rate / one:.2f}x one worker = {rate / one / w:.2f} x W" if one and w > 1 else ""
        print(f"jitflow build_all(backend='ray'), a local cluster of W={w}: {rate:.1f} candidates/s, "
              f"{rate / pool:.2f}x the pool{scaling}", flush=True)


if __name__ == "__main__":
    main()
