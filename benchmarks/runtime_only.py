"""The smallest serving process against the usual one: entries loaded by label in a TVM without its compiler
(jitflow.load_entry, jitflow.load_vm_entry; TVM_USE_RUNTIME_LIB=1) against a full TVM serving the same
entries read-only (JITFLOW_CACHE=readonly: the module built in Python, its key taken, a hit loaded).

    python benchmarks/runtime_only.py [--runs 5]                                   # on the CPU, here
    python benchmarks/runtime_only.py --device cuda --bundle OUTDIR/deploy.tar     # on the GPU machine

On the CPU a vector add ("vecadd") and a Relax MLP ("mlp") are built into a cache first (that needs
TVM's compiler). With --device cuda the entries come from the bundle benchmarks/deploy_gpu.py prepares
(its modules, built the same way on the full side), unpacked into an empty cache. Each run starts both
processes fresh, one after the other, and times from before the interpreter starts: the imports, and the
first right result of each module (checked against numpy). The machine may be shared: the figures are
the minima over the runs (the medians beside them). Also the size of TVM's package as installed and
without its compiler library.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAMES = ("vecadd", "mlp")

#: what both processes share: the inputs, the checks and the clock (T0: set before the interpreter starts)
COMMON = """
import json, os, sys, time
t0 = float(os.environ["T0"])
ms = lambda: round((time.time() - t0) * 1000, 1)
import numpy as np
cuda = os.environ["DEVICE"] == "cuda"
if cuda:
    import torch
rng = np.random.default_rng(0)
a, b, x = (rng.standard_normal(1024).astype("float32"), rng.standard_normal(1024).astype("float32"),
           rng.standard_normal((4, 16)).astype("float32"))
def put(array):
    return torch.from_numpy(array).cuda() if cuda else array
def host(value):
    if cuda and isinstance(value, torch.Tensor):
        return value.cpu().numpy()
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)
def check_vecadd(run):
    c = put(np.zeros(1024, "float32"))
    run(put(a), put(b), c)
    np.testing.assert_allclose(host(c), a + b, rtol=1e-6)
def check_mlp(vm):
    import models
    y = vm["main"](put(x))
    np.testing.assert_allclose(host(y), models.mlp_reference(x, models.mlp_weights()), rtol=1e-4, atol=1e-4)
"""

RUNTIME = COMMON + """
import jitflow
out = {"imports": ms()}
check_vecadd(jitflow.load_entry("vecadd")["main"])
out["vecadd"] = ms()
check_mlp(jitflow.load_vm_entry("mlp", os.environ["DEVICE"]))
out["mlp"] = ms()
out["tvm imported"] = "tvm" in sys.modules
print(json.dumps(out))
"""

FULL = COMMON + """
import tvm, jitflow
sys.path[:0] = [os.environ["BENCHMARKS"], os.environ["TESTS"]]
out = {"imports": ms()}
if cuda:
    from deploy_gpu import executable
else:
    import kernels, models
    executable = lambda name: jitflow.compile(kernels.vecadd(1024) if name == "vecadd" else models.mlp(), "c",
                                              name=name)
exe = executable("vecadd")
check_vecadd(exe["main"])
assert exe.build_info.outcome == "hit", exe.build_info
out["vecadd"] = ms()
exe = executable("mlp")
check_mlp(exe.vm(os.environ["DEVICE"]))
assert exe.build_info.outcome == "hit", exe.build_info
out["mlp"] = ms()
print(json.dumps(out))
"""

BUILD = """
import sys, jitflow, kernels, models
for exe in (jitflow.compile(kernels.vecadd(1024), "c", name="vecadd"), jitflow.compile(models.mlp(), "c", name="mlp")):
    exe.build()
"""


def fresh(code: str, env: dict[str, str]) -> dict:
    """Run `code` in a fresh interpreter; its JSON, with the process's wall time."""
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", code], env=dict(env, T0=repr(start)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"a serving process failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process"] = round((time.time() - start) * 1000, 1)
    return out


def sizes() -> str:
    """TVM's package as installed, and without its compiler library (what a runtime-only install keeps)."""
    import importlib.util

    spec = importlib.util.find_spec("tvm")      # found without importing it (an install may lack pip's metadata)
    if spec is None or not spec.submodule_search_locations:
        return "TVM's package: not found on this path"
    folder = Path(next(iter(spec.submodule_search_locations)))
    total = compiler = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            compiler += path.stat().st_size if path.name == "libtvm_compiler.so" else 0
    return f"TVM's package: {total / 2**20:.0f} MiB as installed, {(total - compiler) / 2**20:.0f} MiB without " \
           f"libtvm_compiler.so ({compiler / 2**20:.0f} MiB)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--bundle", type=Path, help="the bundle of benchmarks/deploy_gpu.py prepare (--device cuda)")
    args = parser.parse_args()
    if args.device == "cuda" and args.bundle is None:
        parser.error("--device cuda serves the bundle deploy_gpu.py prepares: give --bundle OUTDIR/deploy.tar")
    base = dict(os.environ, DEVICE=args.device, BENCHMARKS=str(HERE), TESTS=str(ROOT / "tests"), JITFLOW_RECORD="",
                PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory(prefix="jitflow-runtime-only-") as tmp:
        cache = Path(tmp) / "cache"
        if args.bundle is None:
            subprocess.run([sys.executable, "-c", BUILD], env=dict(base, JITFLOW_CACHE_DIR=str(cache)), check=True)
        else:
            subprocess.run([sys.executable, "-m", "jitflow", "cache", "unpack", str(args.bundle), "--cache-dir",
                            str(cache)], env=base, check=True)
        served = dict(base, JITFLOW_CACHE="readonly", JITFLOW_CACHE_DIR=str(cache))
        found: dict[str, list[dict]] = {"runtime-only TVM, by label": [], "full TVM, read-only hit": []}
        for _ in range(args.runs):
            found["runtime-only TVM, by label"].append(fresh(RUNTIME, dict(served, TVM_USE_RUNTIME_LIB="1")))
            found["full TVM, read-only hit"].append(fresh(FULL, served))
    print(f"{args.device}, {args.runs} runs of each, fresh processes; ms from before the interpreter starts, "
          f"minimum (median)")
    for what, runs in found.items():
        shown = "  ".join(f"{k} {min(r[k] for r in runs):.1f} ({statistics.median(r[k] for r in runs):.1f})"
                          for k in ("imports", *NAMES, "process"))
        note = f"  tvm imported: {runs[0]['tvm imported']}" if "tvm imported" in runs[0] else ""
        print(f"{what:<28} {shown}{note}")
    first = {what: min(r["mlp"] for r in runs) for what, runs in found.items()}
    runtime, full = first.values()
    print(f"both first results: {runtime:.1f} ms against {full:.1f} ms ({full / runtime:.1f}x sooner)")
    print(sizes())


if __name__ == "__main__":
    main()
