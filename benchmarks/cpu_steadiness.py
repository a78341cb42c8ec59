"""How steady a kernel's time is from one process to the next: each selected kernel of
benchmarks/cpu_kernels.py timed in `--fresh` new processes, jitflow's C host beside TVM's LLVM host.

    python benchmarks/cpu_steadiness.py --only NAME,... [--threads 16] [--fresh 5] [--runs 10]
                                        [--min-sample-ms 20] [--budget-s 2] [--json FILE]

What it measures: run after run, a fresh interpreter (TVM_NUM_THREADS set, so TVM's thread pool
starts and places its threads anew) builds every selected kernel both ways (jitflow's from its cache
after the first run), checks them equal and times them interleaved, as cpu_kernels.py does; each
run gives one median per kernel and build. One process per run times all the kernels, so a change
of load falls on all of them, and 5 runs of 8 kernels start 5 interpreters, not 40.

How to read it: per kernel, the minimum, median and maximum over the runs of each build, the
largest distance of a run from its own median (`spread`: max(median / min, max / median) - 1), and
jitflow's median over LLVM's. The goals: every run of a kernel within 10% of its own median, and
jitflow's median at most 1.10x LLVM's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cpu_kernels  # noqa: E402 - the benchmark this one repeats

SPREAD_GOAL, RATIO_GOAL = 0.10, 1.10


def spread(values: list[float]) -> float:
    """How far the farthest run is from the median, as a fraction of it."""
    middle = statistics.median(values)
    return max(middle / min(values), max(values) / middle) - 1


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One kernel's row over its runs (a failed run is counted and named)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    out: dict[str, Any] = {"name": name, "runs": len(runs), "ok": len(ok),
                           "errors": [r.get("error", r.get("status", "")) for r in runs if r.get("status") != "ok"]}
    if not ok:
        return out
    for side in ("jitflow", "llvm"):
        values = [r[side]["median"] for r in ok]
        out[side] = {"min": min(values), "median": statistics.median(values), "max": max(values),
                     "spread": spread(values), "values": values}
    out["ratio"] = out["jitflow"]["median"] / out["llvm"]["median"]
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def table(rows: list[dict[str, Any]], threads: int, fresh: int) -> list[str]:
    width = max([len(r["name"]) for r in rows] + [6])
    head = f"{'min':>9} {'median':>9} {'max':>9} {'spread':>7}"
    lines = [f"{fresh} fresh processes per kernel, TVM_NUM_THREADS={threads}: each run's median, ms; spread = the "
             "farthest run from the median; ratio = jitflow's median / LLVM's",
             f"{'':<{width}} | {'jitflow':^37} | {'llvm':^37} |",
             f"{'kernel':<{width}} | {head} | {head} | {'ratio':>6}"]
    for r in rows:
        if "jitflow" not in r:
            lines.append(f"{r['name']:<{width}} | failed in every run: {r['errors'][0] if r['errors'] else '?'}")
            continue
        cells = [f"{_ms(r[s]['min']):>9} {_ms(r[s]['median']):>9} {_ms(r[s]['max']):>9} {r[s]['spread']:>6.0%}"
                 for s in ("jitflow", "llvm")]
        note = f"  ({r['runs'] - r['ok']} of {r['runs']} runs failed)" if r["ok"] < r["runs"] else ""
        lines.append(f"{r['name']:<{width}} | {cells[0]} | {cells[1]} | {r['ratio']:>5.2f}x{note}")
    done = [r for r in rows if "jitflow" in r]
    for side in ("jitflow", "llvm"):
        wide = [r["name"] for r in done if r[side]["spread"] > SPREAD_GOAL]
        lines.append(f"steady, {side}: every run within {SPREAD_GOAL:.0%} of its median "
                     f"{'met' if not wide else 'NOT met'} ({len(wide)} of {len(done)} over"
                     + (f": {', '.join(wide)}" if wide else "") + ")")
    slow = [f"{r['name']} {r['ratio']:.2f}x" for r in done if r["ratio"] > RATIO_GOAL]
    lines.append(f"jitflow's median at most {RATIO_GOAL:.2f}x LLVM's {'met' if not slow else 'NOT met'} "
                 f"({len(slow)} of {len(done)} over" + (f": {', '.join(slow)}" if slow else "") + ")")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", required=True, help="kernels by name, prefix or pattern, comma-separated")
    parser.add_argument("--threads", default="all", help="one thread count, or all (default)")
    parser.add_argument("--fresh", type=int, default=5, help="fresh processes per kernel (default 5)")
    parser.add_argument("--level", default="x86-64", help="CPU level (default the baseline x86-64)")
    parser.add_argument("--runs", type=int, default=10, help="timed samples of each build in a process (default 10)")
    parser.add_argument("--min-sample-ms", type=float, default=20.0, help="the shortest sample (default 20)")
    parser.add_argument("--budget-s", type=float, default=2.0, help="a kernel's samples stop after 3 runs past this")
    parser.add_argument("--stall-s", type=float, default=cpu_kernels.STALL_S, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write every run to this file")
    args = parser.parse_args(argv)
    args.models, args.clock = False, "wall"
    (_label, threads), *more = cpu_kernels.thread_counts(args.threads)
    if more:
        parser.error("--threads: one thread count")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.fresh):
        for row in cpu_kernels.run_level(args.level, threads, args, names):
            runs.setdefault(row["name"], []).append(row)
            shown = (f"jitflow {_ms(row['jitflow']['median'])} ms, llvm {_ms(row['llvm']['median'])} ms"
                     if row.get("status") == "ok" else row.get("error", row.get("status")))
            print(f"run {r + 1}: {row['name']}: {shown}", file=sys.stderr, flush=True)
    rows = [summarize(name, found) for name, found in runs.items()]
    machine = cpu_kernels.machine()
    print("\n".join(table(rows, threads, args.fresh)))
    print(f"load average at the end {machine['load_average'][0]:.2f}; {machine['usable_cpus']} usable CPUs "
          f"({machine['cpu']}); commit {machine['commit']}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "threads": threads, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
