"""The cost of tracing per call, and a diagnostic of what CUPTI gives on this machine.

    python benchmarks/trace_overhead.py [--model mlp|convnet|vecadd] [--calls 2000] [--dump 5]

Needs a GPU, TVM with its compiler and cupti-python (pip install 'jitflow[trace]'). Prints:
1. versions (Python, TVM, cupti-python, the CUPTI wheel, the driver) and the GPU;
2. the report's model memory (what a call should allocate, copy and launch);
3. one traced run (VM start-up + 3 calls): the trace, how it agrees with the report, the count of
   CUPTI records by kind and the first records of each kind with every field cupti-python gives;
4. microseconds per call: untraced (one synchronize at the end), untraced with a synchronize after
   each call, and through Trace.call (which synchronizes after each call), in interleaved rounds.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]


def versions() -> list[str]:
    out = [f"python {platform.python_version()}"]
    for dist in ("apache-tvm", "cupti-python", "nvidia-cuda-cupti", "cuda-bindings"):
        try:
            out.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist} not installed")
    try:
        from cuda.bindings import driver

        driver.cuInit(0)
        err, version = driver.cuDriverGetVersion()
        err2, dev = driver.cuDeviceGet(0)
        err3, name = driver.cuDeviceGetName(64, dev)
        gpu = bytes(name).split(b"\0")[0].decode()
        out.append(f"CUDA driver API {version}; GPU 0: {gpu} (errors {err}, {err2}, {err3})")
    except Exception as exc:
        out.append(f"driver query failed: {exc}")
    return out


def build(model: str):
    """(executable, arguments on the GPU) for the model."""
    import kernels
    import models
    import numpy as np
    import tvm

    import jitflow

    dev = tvm.runtime.device("cuda", 0)
    rng = np.random.default_rng(0)
    if model == "vecadd":
        exe = jitflow.compile(kernels.vecadd_cuda(1024, 128), "cuda")
        return exe, tuple(tvm.runtime.tensor(rng.random(1024, dtype="float32"), device=dev) for _ in range(3))
    make, shape = {"mlp": (models.mlp, (4, 16)), "convnet": (models.convnet, (2, 3, 16, 16))}[model]
    exe = jitflow.compile(make(), "cuda")
    return exe, (tvm.runtime.tensor(rng.standard_normal(shape).astype("float32"), device=dev),)


def diagnose(exe, args, dump: int) -> None:
    from jitflow.tracing import Trace
    from jitflow.tracing.cupti_source import CuptiSource

    rep = exe.inspect()
    if rep.model is not None:
        from jitflow.report.memory_plan_text import model_section

        print("\n".join(model_section(rep.model)))
    else:
        print("launches per call of main:", [(x.kernel, str(x.grid), str(x.block)) for x in rep.launches])
    source = CuptiSource(raw=[])
    is_vm = rep.model is not None
    with Trace(rep, "main", startup=is_vm, source=source) as t:
        fn = exe.vm("cuda")["main"] if is_vm else exe["main"]
        for i in range(3):
            t.call(fn, *args, label=f"call {i + 1}")           # the result is released at once
    print()
    print(t)
    print()
    print("CUPTI records by kind:", dict(source.record_counts))
    print("windows (CUPTI clock, ns):", [(w.label, w.start, w.end) for w in t.windows])
    by_kind = defaultdict(list)
    for record in source.raw:
        by_kind[record.get("kind")].append(record)
    for kind, records in by_kind.items():
        name = source.names.kinds.get(kind, kind)
        print(f"first {min(dump, len(records))} of {len(records)} {name} records:")
        for record in records[:dump]:
            print("   ", {k: v for k, v in sorted(record.items()) if v not in (None, "")})
    print("events:", [type(e).__name__ for e in t.events].count("KernelEvent"), "kernel launches,",
          len(t.events), "events in all")


def overhead(exe, args, calls: int, rounds: int = 7) -> None:
    import tvm

    import jitflow

    rep = exe.inspect()
    fn = exe.vm("cuda")["main"] if rep.model is not None else exe["main"]
    dev = tvm.runtime.device("cuda", 0)
    for _ in range(200):
        fn(*args)
    dev.sync()
    samples = defaultdict(list)

    def plain():
        for _ in range(calls):
            fn(*args)
        dev.sync()

    def synced():
        for _ in range(calls):
            fn(*args)
            dev.sync()

    def traced():
        with jitflow.trace() as t:
            for _ in range(calls):
                t.call(fn, *args)
        return t

    for _ in range(rounds):
        for name, run in (("untraced, one synchronize at the end", plain),
                          ("untraced, synchronize after each call", synced), ("traced with Trace.call", traced)):
            start = time.perf_counter()
            run()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    print(f"\nmicroseconds per call (median of {rounds} interleaved rounds of {calls} calls, trace set-up and "
          "flush included):")
    for name, us in medians.items():
        print(f"  {name:40s} {us:8.2f} us")
    base = medians["untraced, synchronize after each call"]
    print(f"  tracing costs {medians['traced with Trace.call'] - base:.2f} us per call over a synchronized call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "convnet", "vecadd"], default="mlp")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--dump", type=int, default=3, help="records of each kind to print in full")
    args = parser.parse_args()
    print("\n".join(versions()))
    exe, inputs = build(args.model)
    diagnose(exe, inputs, args.dump)
    overhead(exe, inputs, args.calls)


if __name__ == "__main__":
    main()
