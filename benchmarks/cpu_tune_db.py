"""Tune the CPU workloads of benchmarks/cpu_workloads.py with MetaSchedule and save a small database of
their candidates, which benchmarks/cpu_kernels.py applies to get MetaSchedule-scheduled TIR.

    python benchmarks/cpu_tune_db.py [--trials 64] [--only matmul128,...] [--keep 6] [--wide 3]
                                     [--num-cores 16] [--out benchmarks/data/cpu_kernels]
                                     [--builder in-process|local]

Each workload is tuned on its own (TVM's LLVM host: MetaSchedule refuses target kind "c"), then its
`--keep` fastest records and up to `--wide` others whose schedule holds vectors of 32 lanes or more
are written to the database (`workloads.json`, `records.json`: MetaSchedule's JSON database), so
that the saved files stay small. Workloads not tuned in this run keep the records they had.
`--num-cores` is the target's core count, which decides how finely the candidates split their
parallel loops (the runs measure them on this machine whatever it says).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cpu_schedules  # noqa: E402
import cpu_workloads  # noqa: E402
from cpu_schedules import lanes, open_database, scheduled, seconds  # noqa: E402

DEFAULT_OUT = cpu_schedules.DATABASE


def chosen(records: list[Any], keep: int, wide: int) -> list[Any]:
    """The `keep` fastest measured records, then up to `wide` more with vectors of 32 lanes or more."""
    measured = sorted((r for r in records if seconds(r) < float("inf")), key=seconds)
    out = measured[:keep]
    for record in measured[keep:]:
        if wide <= 0:
            break
        if lanes(scheduled(record)) >= 32:
            out.append(record)
            wide -= 1
    return out


def in_process_builder() -> Any:
    """A MetaSchedule builder that builds each candidate in this process, as LocalBuilder's workers
    do (TVM's LLVM build, exported as a .tar). LocalBuilder starts a fresh pool of workers for every
    batch, and each worker imports TVM's tensor intrinsics first: minutes a batch on a busy small
    machine. Here a candidate that crashes the build ends the run; none has so far."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import local_builder

    @derived_object
    class InProcessBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs: list[Any]) -> list[Any]:
            results = []
            for item in build_inputs:
                try:
                    built = local_builder.default_build(item.mod, item.target, None)
                    results.append(ms.builder.BuilderResult(local_builder.default_export(built), None))
                except Exception as e:  # noqa: BLE001 - a failed candidate is a result, as in LocalBuilder
                    results.append(ms.builder.BuilderResult(None, f"in-process build: {e}"))
            return results

    return InProcessBuilder()


def tune(name: str, trials: int, num_cores: int, work: Path, builder: str) -> list[Any]:
    """Every record of one MetaSchedule run on the workload `name`."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    target = tvm.target.Target({"kind": "llvm", "num-cores": num_cores})
    start = time.perf_counter()
    # generous timeouts: each LocalBuilder worker imports TVM's tensor intrinsics first (tens of
    # seconds on a busy small machine, which the default 30 s do not cover)
    chosen_builder = in_process_builder() if builder == "in-process" else ms.builder.LocalBuilder(timeout_sec=600)
    db = ms.tune_tir(cpu_workloads.module(name), target, str(work / name), max_trials_global=trials,
                     num_trials_per_iter=min(trials, 16), seed=0, builder=chosen_builder,
                     runner=ms.runner.LocalRunner(timeout_sec=120))
    records = list(db.get_all_tuning_records())
    print(f"{name}: {len(records)} records in {time.perf_counter() - start:.0f} s", flush=True)
    return records


def write(out: Path, kept: dict[str, list[Any]]) -> None:
    """The database in `out` replaced by one holding the kept records of each workload (written
    beside it first, so that an interruption leaves the old one)."""
    import os

    from tvm.s_tir import meta_schedule as ms

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        db = open_database(Path(tmp), create=True)
        for name in sorted(kept):
            workload = db.commit_workload(cpu_workloads.module(name))
            for r in kept[name]:
                db.commit_tuning_record(ms.database.TuningRecord(r.trace, workload, r.run_secs, r.target,
                                                                 r.args_info))
        for part in ("workloads.json", "records.json"):
            os.replace(Path(tmp) / part, out / part)


def existing(out: Path, skip: set[str]) -> dict[str, list[Any]]:
    """The saved records of the workloads not in `skip`, by workload name."""
    return {name: rs for name, rs in cpu_schedules.records_by_workload(out).items() if name not in skip}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64, help="MetaSchedule trials per workload")
    parser.add_argument("--only", default="", help="comma-separated workload names (default all)")
    parser.add_argument("--keep", type=int, default=6, help="fastest records kept per workload")
    parser.add_argument("--wide", type=int, default=3, help="more records kept whose vectors have 32+ lanes")
    parser.add_argument("--num-cores", type=int, default=16, help="the tuning target's num-cores")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--builder", choices=("in-process", "local"), default="in-process",
                        help="build candidates in this process (default) or with MetaSchedule's LocalBuilder")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(cpu_workloads.WORKLOADS)
    unknown = sorted(set(names) - set(cpu_workloads.WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {sorted(cpu_workloads.WORKLOADS)}")
    with tempfile.TemporaryDirectory(prefix="cpu-tune-") as work:
        for name in names:   # the database is written after each workload: an interrupted run keeps those done
            records = chosen(tune(name, args.trials, args.num_cores, Path(work), args.builder), args.keep, args.wide)
            print(f"  kept {len(records)}: " + ", ".join(f"{seconds(r) * 1e3:.3f} ms" for r in records), flush=True)
            write(args.out, dict(existing(args.out, {name}), **{name: records}))
    kept = existing(args.out, set())
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"saved {sum(map(len, kept.values()))} records of {len(kept)} workloads in {args.out} ({size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
