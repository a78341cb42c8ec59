"""Cold start: the first build in a brand-new environment, a second cache folder, and real models,
each against TVM's own path in the same run.

    python benchmarks/cold_start.py [--runs 3] [--skip-first] [--skip-models] [--cuda auto|yes|no]
                                    [--models resnet18,mobilenet_v2,transformer] [--arch sm_90]

Every figure is the median over fresh processes; 'to callable' starts after the imports and the
module's construction (and, on CUDA, the CUDA context), which cost every path the same.
- first build: each process gets an empty HOME (so an empty jitflow cache and an empty zig cache)
  and times jitflow.compile(...) to a callable function; TVM's path is tvm.compile(...).jit().
- second cache folder: the same HOME (zig's cache warm), a new JITFLOW_CACHE_DIR.
- real models (benchmarks/nn_models.py: resnet18, mobilenet_v2, a transformer encoder layer of
  width 512 with a causal mask): zig's cache warm, a new jitflow cache folder; jitflow's VM
  function against tvm.compile(...) + relax.VirtualMachine(...), with TVM's default CPU target
  "llvm" (the ratio's reference) and with "c" (gcc; TVM cannot print the transformer's mask in C);
  then one inference each.
- CUDA (when a GPU is present): the vector add and the transformer layer for one arch.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import fresh_process  # noqa: E402

CHILD = """
import json, sys, time
sys.path[:0] = {paths!r}
import numpy as np, tvm, jitflow, kernels, nn_models
from jitflow.runtime import load
mod, x, name = {make}
cuda = {arch!r} is not None
if cuda:   # the CUDA context costs every path the same: create it before timing
    load.ensure_cuda_backend()
    tvm.runtime.empty((1,), "float32", tvm.cuda(0))
device = tvm.cuda(0) if cuda else tvm.cpu(0)
__import__("gc").collect()   # the imports' garbage: collected here, not in either path's timed span
start = time.perf_counter()
if {mode!r} == "tvm":
    target = tvm.target.Target({{"kind": "cuda", "arch": {arch!r}}}) if cuda else {tvm_target!r}
    ex = tvm.compile(mod, target=target)
    f = tvm.relax.VirtualMachine(ex, device)[name] if x is not None else ex.jit()[name]
    outcome = "built"
else:
    exe = jitflow.compile(mod, "cuda" if cuda else "c", arch={arch!r})
    f = exe.vm(device)[name] if x is not None else exe[name]
    outcome = exe.build_info.outcome
callable_s = time.perf_counter() - start
run_s = None
if x is not None:
    xt = tvm.runtime.tensor(x, device)
    f(xt)
    if cuda:
        device.sync()
    t = time.perf_counter()
    f(xt)
    if cuda:
        device.sync()
    run_s = time.perf_counter() - t
print(json.dumps({{"callable": callable_s, "run": run_s, "outcome": outcome}}))
"""

KERNELS = {"vector add 1024": ("kernels.vecadd(), None, 'main'", "kernels.vecadd_cuda(), None, 'main'"),
           "matmul 128": ("kernels.matmul(128), None, 'main'", None)}
#: the real models: nn_models builders (the transformer at a realistic width)
MODELS = {"resnet18": "nn_models.resnet18()", "mobilenet_v2": "nn_models.mobilenet_v2()",
          "transformer": "nn_models.transformer_layer(seq=128, d=512, heads=8, ff=2048)"}


def child(mode: str, make: str, arch: str | None, env: dict[str, str], tvm_target: str = "c") -> dict:
    code = CHILD.format(paths=[str(ROOT), str(ROOT / "tests"), str(HERE)], make=make, mode=mode, arch=arch,
                        tvm_target=tvm_target)
    return fresh_process.run(code, env, f"{mode} {make}")


def child_or_none(mode: str, make: str, arch: str | None, env: dict[str, str], tvm_target: str) -> dict | None:
    """child(), or None when that path cannot build the module."""
    try:
        return child(mode, make, arch, env, tvm_target)
    except SystemExit:
        return None


def fresh_env(home: Path, cache: Path | None = None) -> dict[str, str]:
    """A process environment whose user folders are all under `home` (empty on first use)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JITFLOW_", "XDG_"))}
    env["HOME"] = str(home)
    if cache is not None:
        env["JITFLOW_CACHE_DIR"] = str(cache)
    return env


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


WIDTH = 58


def line(case: str, ours: float, theirs: float, goal: float | None, unit: str = "ms") -> str:
    scale, digits = (1000.0, 1) if unit == "ms" else (1.0, 2)
    ratio = ours / theirs
    verdict = "" if goal is None else f"   <= {goal:.1f}x {'ok' if ratio <= goal else 'OVER'}"
    return (f"{case:<{WIDTH}}{ours * scale:>9.{digits}f} {unit}{theirs * scale:>9.{digits}f} {unit}"
            f"{ratio:>8.2f}x{verdict}")


def first_builds(tmp: Path, runs: int, arch: str | None) -> list[str]:
    out = []
    for name, (cpu, gpu) in KERNELS.items():
        for target, make in (("c", cpu), ("cuda", gpu if arch else None)):
            if make is None:
                continue
            a = arch if target == "cuda" else None
            ours, theirs, second = [], [], []
            for i in range(runs):
                home = tmp / f"home-{target}-{name.split()[0]}-{i}"
                ours.append(child("jitflow", make, a, fresh_env(home)))
                theirs.append(child("tvm", make, a, fresh_env(tmp / f"tvm-home-{i}")))
                second.append(child("jitflow", make, a, fresh_env(home, home / "second-cache")))
            tag = f"{name}, {target}{' ' + a if a else ''}"
            out.append(line(f"first build, new machine: {tag}", median(ours, "callable"),
                            median(theirs, "callable"), 1.5))
            out.append(line(f"first build, second cache folder: {tag}", median(second, "callable"),
                            median(theirs, "callable"), 1.5))
    return out


def models(tmp: Path, runs: int, names: list[str], arch: str | None) -> list[str]:
    home = tmp / "models-home"
    child("jitflow", KERNELS["vector add 1024"][0], None, fresh_env(home))      # zig's cache: warm
    out, inference = [], []
    for name in names:
        make = f"(m := {MODELS[name]}).mod, m.example_input(), 'forward'"
        for a in ([None, arch] if arch and name == "transformer" else [None]):
            ours, theirs = [], {"llvm": [], "c": []}
            for i in range(runs):
                ours.append(child("jitflow", make, a, fresh_env(home, tmp / f"{name}-{a}-{i}")))
                for target in (["llvm", "c"] if a is None else ["llvm"]):
                    theirs[target].append(child_or_none("tvm", make, a, fresh_env(home), target))
                shutil.rmtree(tmp / f"{name}-{a}-{i}", ignore_errors=True)
            tag = f"{name}, {'cuda ' + a if a else 'c'}"
            mine = median(ours, "callable")
            out.append(line(f"cold build, zig warm: {tag} (TVM: llvm host)", mine,
                            median(theirs["llvm"], "callable"), 1.0, "s"))
            runs_text = [f"jitflow {median(ours, 'run') * 1000:.1f} ms",
                         f"TVM llvm {median(theirs['llvm'], 'run') * 1000:.1f} ms"]
            if a is None and all(theirs["c"]):
                out.append(line(f"cold build, zig warm: {tag} (TVM: C host, gcc)", mine,
                                median(theirs["c"], "callable"), None, "s"))
                runs_text.append(f"TVM C (gcc) {median(theirs['c'], 'run') * 1000:.1f} ms")
            elif a is None:
                out.append(f"{'cold build, zig warm: ' + tag + ' (TVM: C host, gcc)':<{WIDTH}}TVM cannot build it")
            inference.append(f"  one inference, {tag}: " + ", ".join(runs_text))
    return out + inference


def gpu_present() -> bool:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        return err == driver.CUresult.CUDA_SUCCESS and driver.cuDeviceGetCount()[1] > 0
    except Exception:  # noqa: BLE001 - no driver, no bindings: no GPU
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-first", action="store_true", help="skip the first builds of the small kernels")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--cuda", default="auto", choices=["auto", "yes", "no"])
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    arch = args.arch if args.cuda == "yes" or (args.cuda == "auto" and gpu_present()) else None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="jitflow-cold-") as tmp:
        lines = [] if args.skip_first else first_builds(Path(tmp), args.runs, arch)
        if not args.skip_models:
            lines += models(Path(tmp), args.runs, [m for m in args.models.split(",") if m], arch)
    print(f"cold start, median of {args.runs} fresh processes, {os.cpu_count()} cores; "
          f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'case':<{WIDTH}}{'jitflow':>12}{'TVM':>12}{'ratio':>9}   goal")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
