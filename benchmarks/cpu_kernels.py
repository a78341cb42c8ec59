"""CPU-scheduled kernels: jitflow's C host against TVM's LLVM host, at one thread and at every core.

    python benchmarks/cpu_kernels.py [--threads 1,all] [--levels x86-64[,x86-64-v3,x86-64-v4]]
                                     [--only NAME,...] [--runs 10] [--models] [--json FILE]
                                     [--min-sample-ms 20] [--budget-s 10] [--stall-s 600] [--list]

What it measures: each kernel of a corpus of scheduled TIR functions (benchmarks/cpu_corpus.py:
`hand/` parallel and vectorized kernels scheduled by hand, `upstream/` the constructs of TVM's
own parallel-loop tests, `dlight/` the functions of the CPU models that dlight's CPU rules
schedule, `tuned/` MetaSchedule candidates from the database in benchmarks/data/cpu_kernels) is
built by `jitflow.compile(mod, "c", cpu_level=L).jit()` and by `tvm.compile(mod, target="llvm")` at
the same level (the baseline x86-64: LLVM's generic CPU; x86-64-v3, -v4: `-mcpu` of the level's
name), run on the same inputs, checked equal within a tolerance, then timed: both builds called
in turn, `--runs` samples each (see cpu_timing.py). With `--models`, also the CPU models of
benchmarks/nn_models.py whole (`model/`), plain and scheduled with dlight's rules (`/dlight`):
jitflow's `.vm("cpu")` against `tvm.compile` + `relax.VirtualMachine`.

Each thread count runs in a process of its own, with TVM_NUM_THREADS set (TVM's thread pool reads
it when it starts); "all" is every CPU this process may use. The first process builds jitflow's
libraries (cached on disk: later runs and thread counts hit), LLVM's are built in each.

How to read it: a line per kernel with the median time of each build and the ratio jitflow / LLVM
at each thread count (below 1.00x: jitflow faster), then the geometric mean of the ratios, and the
goals: every kernel at most 1.00x at one thread and at all threads, the geometric mean at most
0.90x (models: each at most 1.00x). A kernel that fails to build, to run or to match LLVM's result
is a row saying so (the error's first line), counts against the goals, and stays out of the mean.
`--only` takes names, prefixes (`hand`, `tuned/matmul512`) or shell patterns (`*softmax*`).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")
GROUPS = ("hand", "upstream", "dlight", "tuned")
MODEL_NAMES = ("resnet18", "mobilenet_v2", "transformer")
KERNEL_GOAL, MEAN_GOAL = 1.0, 0.9
#: a child that reports nothing for this long is stopped, and its kernel counted as failed (--stall-s)
STALL_S = 600


# -- selection ---------------------------------------------------------------------------------

def matches(name: str, patterns: list[str]) -> bool:
    """Whether `--only` selects the kernel `name` (no patterns: every kernel)."""
    return not patterns or any(name == p or name.startswith(p.rstrip("/") + "/") or fnmatch.fnmatch(name, p)
                               for p in patterns)


def could_match(group: str, patterns: list[str]) -> bool:
    """Whether some kernel of `group` may be selected (so that unselected groups are not listed)."""
    def one(p: str) -> bool:
        head = p.split("/", 1)[0]
        return fnmatch.fnmatch(group, head) or ("/" not in p and any(c in p for c in "*?["))
    return not patterns or any(one(p) for p in patterns)


# -- the child: one level, one thread count ----------------------------------------------------

def child(spec: dict[str, Any]) -> int:
    """Build, check and time the selected kernels (and models), one JSON line each into spec['out']."""
    sys.path[:0] = [str(ROOT), str(HERE)]
    import cpu_corpus
    import cpu_timing

    level = None if spec["level"] == "x86-64" else spec["level"]
    patterns, skip = spec["only"], set(spec["skip"])
    tag = f"[{spec['level']}, {spec['threads']} thread{'s' if spec['threads'] != 1 else ''}]"
    with open(spec["out"], "a") as out:
        def emit(record: dict[str, Any]) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        def run(name: str, work: Any) -> None:
            emit({"event": "start", "name": name})
            try:
                result = work()
            except Exception as e:  # noqa: BLE001 - the benchmark's own failure: a row, and its traceback
                traceback.print_exc()
                result = cpu_timing.row(name, status="failed", error=f"benchmark: {cpu_timing.first_line(e)}")
            emit(result)
            shown = f"{result['ratio']:.2f}x" if result.get("status") == "ok" else result.get("error", "")
            print(f"{tag} {name}: {shown}", file=sys.stderr, flush=True)

        groups = tuple(g for g in GROUPS if could_match(g, patterns))
        try:
            corpus = cpu_corpus.kernels(level, groups)
        except Exception as e:  # noqa: BLE001 - the listing's failure is a row too
            emit(cpu_timing.row("corpus", status="failed", error=f"listing: {cpu_timing.first_line(e)}"))
            corpus = []
        for kernel in corpus:
            if matches(kernel.name, patterns) and kernel.name not in skip:
                run(kernel.name, lambda k=kernel: cpu_timing.time_kernel(
                    k, level, spec["runs"], spec["min_sample_s"], spec["budget_s"], spec.get("clock", "wall")))
        if spec["models"]:
            for name in MODEL_NAMES:
                for scheduled in (False, True):
                    label = f"model/{name}" + ("/dlight" if scheduled else "")
                    if matches(label, patterns) and label not in skip:
                        run(label, lambda n=name, s=scheduled: cpu_timing.time_model(
                            n, s, level, spec["runs"], spec["min_sample_s"], spec["budget_s"]))
    return 0


# -- the parent --------------------------------------------------------------------------------

def _read(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The rows a child wrote, and the kernel it had started but not finished (if any)."""
    rows, started = [], None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:   # the last line of a child that died writing it
            continue
        if record.get("event") == "start":
            started = record["name"]
        else:
            rows.append(record)
            started = None
    return rows, started


def run_level(level: str, threads: int, args: argparse.Namespace, patterns: list[str]) -> list[dict[str, Any]]:
    """Every selected row at one level and thread count, from child processes: one that dies or
    stalls loses only the kernel it was on (a row saying so), and a new one takes the rest."""
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cpu-kernels-") as tmp:
        out = Path(tmp) / "rows.jsonl"
        out.touch()
        while True:
            spec = {"level": level, "threads": threads, "only": patterns, "skip": [r["name"] for r in rows],
                    "runs": args.runs, "min_sample_s": args.min_sample_ms / 1000, "budget_s": args.budget_s,
                    "models": args.models, "clock": args.clock,
                    "out": str(out)}
            out.write_text("")
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                                    env=env)
            last, size = time.monotonic(), 0
            while proc.poll() is None:
                time.sleep(0.5)
                if out.stat().st_size != size:
                    last, size = time.monotonic(), out.stat().st_size
                elif time.monotonic() - last > args.stall_s:
                    proc.kill()
                    proc.wait()
            done, started = _read(out)
            rows += done
            if proc.returncode == 0 or started is None:
                if proc.returncode != 0:
                    rows.append({"name": f"(child at {level}, {threads} threads)", "group": "run",
                                 "status": "failed", "error": f"child exited with {proc.returncode}"})
                return rows
            how = (f"no progress in {args.stall_s:g} s (stopped)" if proc.returncode == -9
                   else f"the process died ({_exit(proc.returncode)})")
            rows.append({"name": started, "group": started.split("/", 1)[0], "status": "failed", "error": how})


def _exit(code: int) -> str:
    if code < 0:
        import signal

        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: list[dict[str, Any]], models: bool) -> dict[str, Any]:
    """The goals for one level and thread count: every kernel at most KERNEL_GOAL, the geometric mean
    of the kernels at most MEAN_GOAL (models: each at most KERNEL_GOAL)."""
    picked = [r for r in rows if (r["group"] == "model") == models]
    ok = [r for r in picked if r.get("status") == "ok"]
    over = sorted((r for r in ok if r["ratio"] > KERNEL_GOAL), key=lambda r: -r["ratio"])
    failed = [r for r in picked if r.get("status") != "ok"]
    mean = geometric_mean([r["ratio"] for r in ok])
    out = {"count": len(picked), "ok": len(ok), "over": len(over), "failed": len(failed), "geomean": mean,
           "worst": None if not over else {"name": over[0]["name"], "ratio": over[0]["ratio"]},
           "every_kernel_met": bool(picked) and not over and not failed}
    if not models:
        out["geomean_met"] = mean is not None and mean <= MEAN_GOAL
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}" if seconds < 0.1 else f"{seconds * 1000:.1f}"


def table(level: str, target: dict[str, Any], results: dict[str, list[dict[str, Any]]], runs: int) -> list[str]:
    """The level's lines: one per kernel with each thread count's times and ratio, then the goals."""
    labels = list(results)
    names: list[str] = []
    for rows in results.values():
        names += [r["name"] for r in rows if r["name"] not in names]
    by = {label: {r["name"]: r for r in rows} for label, rows in results.items()}
    width = max([len(n) for n in names] + [len("geometric mean")])
    cell = 39
    llvm = "llvm" + (f" -mcpu={target['mcpu']}" if "mcpu" in target else " (generic CPU)")
    lines = [f"CPU level {level}: jitflow \"c\" against TVM {llvm}; medians of up to {runs} interleaved samples "
             "(at least 3, within --budget-s), ms; ratio = jitflow / LLVM (min: of the fastest samples)",
             f"{'':<{width}}" + "".join(f" | {label:^{cell}}" for label in labels),
             f"{'kernel':<{width}}" + f" | {'jitflow':>10} {'llvm':>10} {'ratio':>8} {'(min)':>8}" * len(labels)]
    errors: list[str] = []
    for kind in (False, True):
        chosen = [n for n in names if (n.split("/", 1)[0] == "model") == kind]
        if not chosen:
            continue
        for name in chosen:
            text = f"{name:<{width}}"
            for label in labels:
                r = by[label].get(name)
                if r is None:
                    text += f" | {'(not run)':^{cell}}"
                elif r.get("status") == "ok":
                    text += (f" | {_ms(r['jitflow']['median']):>10} {_ms(r['llvm']['median']):>10} "
                             f"{r['ratio']:>7.2f}x {r['ratio_min']:>7.2f}x")
                else:
                    note = f"{r['status']}: see [{len(errors) + 1}]"
                    errors.append(f"  [{len(errors) + 1}] {name} ({label}): {r.get('error', '')}")
                    text += f" | {note:^{cell}}"
            lines.append(text)
        means = [summary(results[label], kind)["geomean"] for label in labels]
        lines.append(f"{'geometric mean' + (' (models)' if kind else ''):<{width}}"
                     + "".join(f" | {'':>21} {m:>7.2f}x {'':>8}" if m else f" | {'-':^{cell}}" for m in means))
    for label in labels:
        groups: dict[str, list[float]] = {}
        for r in results[label]:
            if r.get("status") == "ok" and r["group"] != "model":
                groups.setdefault(r["group"], []).append(r["ratio"])
        if len(groups) > 1:
            lines.append(f"geometric mean by group, {label}: " + ", ".join(
                f"{g} {geometric_mean(v):.2f}x ({len(v)})" for g, v in groups.items()))
    lines += errors
    for kind in (False, True):
        if not any(summary(results[label], kind)["count"] for label in labels):
            continue
        parts = []
        for label in labels:
            s = summary(results[label], kind)
            text = (f"{label}: every {'model' if kind else 'kernel'} at most {KERNEL_GOAL:.2f}x "
                    f"{'met' if s['every_kernel_met'] else 'NOT met'} ({s['over']} of {s['count']} over"
                    + (f", worst {s['worst']['name']} {s['worst']['ratio']:.2f}x" if s["worst"] else "")
                    + (f", {s['failed']} failed" if s["failed"] else "") + ")")
            if not kind:
                mean = "-" if s["geomean"] is None else f"{s['geomean']:.2f}x"
                text += f"; geometric mean {mean}, at most {MEAN_GOAL:.2f}x {'met' if s['geomean_met'] else 'NOT met'}"
            parts.append(text)
        lines.append(f"goals at {level}{' (models)' if kind else ''}: " + "; ".join(parts))
    return lines


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def thread_counts(text: str) -> list[tuple[str, int]]:
    """--threads as (label, count): "1" -> ("1 thread", 1), "all" -> ("all 16 threads", 16)."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        n = usable_cpus() if part == "all" else int(part)
        label = f"all {n} threads" if part == "all" else f"{n} thread{'s' if n != 1 else ''}"
        if n < 1:
            raise SystemExit(f"--threads: {part!r} is not a thread count")
        out.append((label, n))
    return out


def level_missing(level: str) -> list[str]:
    """The CPU features this machine lacks for the level (its LLVM build would die of SIGILL)."""
    sys.path.insert(0, str(ROOT))
    from jitflow.runtime import cpu_features
    from jitflow.targets import cpu_level

    if level == "x86-64":
        return []
    return cpu_features.missing(cpu_level.LEVELS[cpu_level.X86][level][1])


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    return {"cpu": model, "usable_cpus": usable_cpus(), "load_average": os.getloadavg(), "commit": commit}


def list_kernels(patterns: list[str], models: bool, level: str) -> int:
    """--list: the names --only selects (at the first level given: dlight's functions depend on it)."""
    sys.path[:0] = [str(ROOT), str(HERE)]
    import cpu_corpus

    groups = tuple(g for g in GROUPS if could_match(g, patterns))
    names = [k.name for k in cpu_corpus.kernels(None if level == "x86-64" else level, groups)]
    if models:
        names += [f"model/{m}{s}" for m in MODEL_NAMES for s in ("", "/dlight")]
    print("\n".join(n for n in names if matches(n, patterns)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,all", help="thread counts, each in its own process (default 1,all)")
    parser.add_argument("--levels", default="x86-64", help=f"CPU levels: {', '.join(LEVELS)} (default x86-64)")
    parser.add_argument("--only", default="", help="kernels by name, prefix or shell pattern, comma-separated")
    parser.add_argument("--runs", type=int, default=10, help="timed samples of each build (default 10)")
    parser.add_argument("--min-sample-ms", type=float, default=20.0,
                        help="the shortest sample: short calls are repeated to last this long (default 20)")
    parser.add_argument("--budget-s", type=float, default=10.0,
                        help="a kernel's samples stop after 3 runs once they have taken this long (default 10 s)")
    parser.add_argument("--models", action="store_true", help="also the CPU models, whole (they take longer)")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall",
                        help="wall time (default), or the calling thread's CPU time: steadier on a shared "
                             "machine, and meaningful only at --threads 1")
    parser.add_argument("--json", type=Path, help="also write every row and the goals to this file")
    parser.add_argument("--stall-s", type=float, default=STALL_S,
                        help=f"stop a kernel whose build or run reports nothing for this long (default {STALL_S} s)")
    parser.add_argument("--list", action="store_true", help="print the selected kernels' names and stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    patterns = [p.strip() for p in args.only.split(",") if p.strip()]
    if args.list:
        return list_kernels(patterns, args.models, args.levels.split(",")[0].strip())
    if platform.machine() not in ("x86_64", "AMD64"):
        parser.error(f"the CPU levels timed here are x86-64's; this machine is {platform.machine()}")
    levels = [lv.strip() for lv in args.levels.split(",") if lv.strip()]
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown:
        parser.error(f"unknown CPU levels {unknown}; known: {', '.join(LEVELS)} (aarch64 is not timed here)")
    counts = thread_counts(args.threads)
    if args.clock == "thread" and any(n != 1 for _, n in counts):
        parser.error("--clock thread measures the calling thread only: use it with --threads 1")
    sys.path.insert(0, str(HERE))
    from cpu_schedules import llvm_target

    report: dict[str, Any] = {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
                              "machine": machine(), "levels": {}}
    start = time.perf_counter()
    for level in levels:
        lacking = level_missing(level)
        if lacking:
            print(f"CPU level {level}: skipped, this CPU lacks {', '.join(lacking)}\n", flush=True)
            report["levels"][level] = {"skipped": f"this CPU lacks {', '.join(lacking)}"}
            continue
        target = llvm_target(None if level == "x86-64" else level)
        results = {label: run_level(level, n, args, patterns) for label, n in counts}
        if not any(results.values()):
            print(f"CPU level {level}: no kernel matches --only {args.only}\n", flush=True)
        else:
            print("\n".join(table(level, target, results, args.runs)) + "\n", flush=True)
        entry: dict[str, Any] = {"llvm_target": target, "threads": {}}
        for (label, n), rows in zip(counts, results.values()):
            goals = {"kernels": summary(rows, False)}
            if args.models:
                goals["models"] = summary(rows, True)
            entry["threads"][label] = {"threads": n, "rows": rows, "goals": goals}
        report["levels"][level] = entry
    report["machine"]["load_average_after"] = os.getloadavg()
    report["wall_s"] = time.perf_counter() - start
    print(f"load average before {report['machine']['load_average'][0]:.2f}, after "
          f"{report['machine']['load_average_after'][0]:.2f}; {report['machine']['usable_cpus']} usable CPUs "
          f"({report['machine']['cpu']}); {report['wall_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
