"""Cold start: the first build in a brand-new environment, a second cache folder, and real models,
each against TVM's own path in the same run.

    python benchmarks/cold_start.py [--runs 3] [--skip-first] [--skip-models] [--cuda auto|yes|no]
                                    [--models resnet18,mobilenet_v2,transformer] [--arch sm_90]
                                    [--cpu-levels x86-64,x86-64-v3 [--calls 5]] [--bytecode]

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
- --bytecode: the children find jitflow's modules compiled to bytecode, as an installed package has
  them (pip writes it; TVM's always is). Without it they get this process's environment, and under
  PYTHONDONTWRITEBYTECODE a checkout's jitflow is compiled from source in every child, inside the
  timed span (the modules a first build imports: some 130 ms on 2 cores).
- CPU levels (--cpu-levels): one inference of each model built by jitflow at a CPU level against
  TVM's LLVM build with the same -mcpu ("llvm" alone for the baseline x86-64, which builds for the
  generic x86-64 CPU), in paired rounds whose order alternates (the machine's load moves both
  alike), with the TIR functions that make most of the difference: each kernel is timed on its own
  in one more call, through the VM's instrument hook, and matched by name across the two builds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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


#: set by --bytecode: where the children keep jitflow's bytecode (made before any timing)
BYTECODE: dict[str, str] = {}


def fresh_env(home: Path, cache: Path | None = None) -> dict[str, str]:
    """A process environment whose user folders are all under `home` (empty on first use)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JITFLOW_", "XDG_"))}
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(BYTECODE)
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


LEVEL_CHILD = """
import json, statistics, sys, time
sys.path[:0] = {paths!r}
import numpy as np, tvm, tvm_ffi, jitflow, nn_models
m = {make}
device = tvm.cpu(0)
if {mode!r} == "tvm":
    mcpu = tvm.target.codegen.llvm_get_system_cpu() if {level!r} == "native" else {level!r}
    target = {{"kind": "llvm"}} if mcpu is None else {{"kind": "llvm", "mcpu": mcpu}}
    built = tvm.compile(m.mod, target=tvm.target.Target(target))
else:
    built = jitflow.compile(m.mod, "c", cpu_level={level!r}).jit()
vm = tvm.relax.VirtualMachine(built, device)
x = tvm.runtime.tensor(m.example_input(), device)
np.save({out!r}, vm["forward"](x).numpy())
runs = []
for _ in range({calls}):
    start = time.perf_counter()
    vm["forward"](x)
    runs.append(time.perf_counter() - start)
kernels, started = {{}}, {{}}
def instrument(func, symbol, before, ret, *args):   # one more call, each kernel timed on its own
    now = time.perf_counter()
    if before:
        started[symbol] = now
    else:
        kernels[symbol] = kernels.get(symbol, 0.0) + now - started[symbol]
    return 0
vm.set_instrument(tvm_ffi.convert(instrument))
vm["forward"](x)
print(json.dumps({{"run": statistics.median(runs), "kernels": kernels}}))
"""


def level_child(mode: str, model: str, level: str | None, env: dict[str, str], out: Path, calls: int) -> dict:
    code = LEVEL_CHILD.format(paths=[str(ROOT), str(ROOT / "tests"), str(HERE)], make=MODELS[model], mode=mode,
                              level=level, out=str(out), calls=calls)
    return fresh_process.run(code, env, f"{mode} {model} at {level or 'the baseline'}")


def gap_sources(ours: dict[str, float], theirs: dict[str, float], top: int = 4) -> str:
    """The kernels (TIR functions, named alike in both builds) that make most of jitflow's gap."""
    gaps = sorted(((ours[k] - theirs.get(k, 0.0), k) for k in ours), reverse=True)
    total = sum(g for g, _ in gaps if g > 0)
    if total <= 0:
        return "no kernel is slower"
    shown = gaps[:top]
    share = sum(g for g, _ in shown if g > 0) / total
    slower = len([g for g, _ in gaps if g > 0])
    return (f"{slower} kernels slower by {total * 1000:.1f} ms in all, {share:.0%} of it in "
            + ", ".join(f"{k} {ours[k] * 1000:.1f} vs {theirs.get(k, 0.0) * 1000:.1f} ms" for _, k in shown))


#: two of mobilenet_v2's 1x1 convolutions as TVM's C host prints them. The buffers are pointers read
#: from the DLTensors, so clang must assume that a store to conv may change pad or B (conv2d3: 16 to 96
#: channels at 112x112); and each output is a serial sum (conv2d29: 320 channels to 1280 at 7x7),
#: whose chain of dependent additions an FMA's latency lengthens
PROBES = r"""
#define CONV(C, K, HW) for (int ff = 0; ff < K; ++ff) for (int i = 0; i < HW; ++i) for (int rc = 0; rc < C; ++rc) { \
    if (rc == 0) conv[ff * HW + i] = 0.0f; conv[ff * HW + i] = conv[ff * HW + i] + pad[rc * HW + i] * B[ff * C + rc]; }
void conv2d3_as_printed(float* pad, float* B, float* conv) { CONV(16, 96, 12544) }
static void conv2d3_body(float* restrict pad, float* restrict B, float* restrict conv) { CONV(16, 96, 12544) }
void conv2d3_restrict(float* pad, float* B, float* conv) { conv2d3_body(pad, B, conv); }
static void conv2d29_body(float* restrict pad, float* restrict B, float* restrict conv) { CONV(320, 1280, 49) }
void conv2d29_restrict(float* pad, float* B, float* conv) { conv2d29_body(pad, B, conv); }
"""


def _probe_library(tmp: Path, level: str, contract: bool) -> Any:
    """PROBES compiled as jitflow compiles host C at `level` (with `contract`: a * b + c fused into FMAs,
    as TVM's LLVM host does)."""
    import ctypes

    from jitflow.targets import cpu_level
    from jitflow.toolchain.zig_cc import zig, zig_cache

    source, lib = tmp / "probes.c", tmp / f"probes_{level}_{contract}.so"
    source.write_text(PROBES)
    resolved = cpu_level.resolve(level, "x86_64-linux-gnu", lambda: (), None)
    zig.run([*zig.flags("x86_64-linux-gnu", tmp, resolved.zig_cpu if resolved else None),
             *(["-ffp-contract=fast"] if contract else []), "-shared", source.name, "-o", lib.name],
            cwd=tmp, zig_cache=zig_cache.folder(None))
    return ctypes.CDLL(str(lib))


def probes(tmp: Path, level: str, calls: int) -> str:
    """Where the gaps come from, each probe compiled by the same zig both ways and timed here (best of `calls`)."""
    import ctypes
    import time

    import numpy as np

    arrays = [np.random.default_rng(0).standard_normal(n).astype("float32") for n in (320 * 12544, 1280 * 320)]
    arrays.append(np.zeros(1280 * 12544, "float32"))
    pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
    libraries = {contract: _probe_library(tmp, level, contract) for contract in (False, True)}

    def best(name: str, contract: bool = False) -> float:
        func = getattr(libraries[contract], name)
        func(*pointers)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            func(*pointers)
            times.append(time.perf_counter() - start)
        return min(times) * 1000

    return (f"    probes at {level}, compiled alike by zig: conv2d3 as printed {best('conv2d3_as_printed'):.2f} ms, "
            f"its buffers as restrict parameters {best('conv2d3_restrict'):.2f} ms; conv2d29 (restrict) as "
            f"jitflow builds it (-ffp-contract=off) {best('conv2d29_restrict'):.2f} ms, fused into FMAs "
            f"{best('conv2d29_restrict', True):.2f} ms")


def cpu_levels(tmp: Path, runs: int, names: list[str], levels: list[str], calls: int) -> list[str]:
    """One inference at each CPU level, jitflow against TVM's LLVM build for the same CPU, in paired rounds
    (the order alternating), with the kernels that make the difference."""
    import numpy as np

    home = tmp / "levels-home"
    env = fresh_env(home, tmp / "levels-cache")      # jitflow builds once per level, then hits
    out = [f"one inference at a CPU level (median of {calls} calls a process; {runs} paired rounds, "
           "jitflow and TVM's llvm -mcpu=LEVEL alternating first):"]
    for name in names:
        for level in levels:
            asked = None if level in ("x86-64", "baseline") else level
            rounds = []
            for i in range(runs):
                pair = {}
                for mode in (("jitflow", "tvm") if i % 2 == 0 else ("tvm", "jitflow")):
                    pair[mode] = level_child(mode, name, asked, env, tmp / f"{mode}.npy", calls)
                pair["diff"] = float(np.max(np.abs(np.load(tmp / "jitflow.npy") - np.load(tmp / "tvm.npy"))))
                rounds.append(pair)
            ratios = sorted(r["jitflow"]["run"] / r["tvm"]["run"] for r in rounds)
            mine = statistics.median(r["jitflow"]["run"] for r in rounds)
            theirs = statistics.median(r["tvm"]["run"] for r in rounds)
            out.append(f"  {name}, {level}: jitflow {mine * 1000:.1f} ms, TVM llvm {theirs * 1000:.1f} ms, "
                       f"ratio {statistics.median(ratios):.2f}x (rounds {ratios[0]:.2f} to {ratios[-1]:.2f}), "
                       f"max abs diff {max(r['diff'] for r in rounds):.2g}")
            last = rounds[-1]
            out.append(f"    where: {gap_sources(last['jitflow']['kernels'], last['tvm']['kernels'])}")
    out += [probes(tmp, level, calls) for level in levels if level != "native"]
    return out


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
    parser.add_argument("--cpu-levels", default="", metavar="LEVEL,...",
                        help="also compare one inference of each model at these CPU levels (x86-64 for the "
                             "baseline, x86-64-v3, ...) with TVM's LLVM build for the same -mcpu, in paired rounds")
    parser.add_argument("--calls", type=int, default=5, help="inferences timed in each process (--cpu-levels)")
    parser.add_argument("--bytecode", action="store_true",
                        help="give the children jitflow's modules compiled to bytecode, as an installed package has them")
    args = parser.parse_args()
    arch = args.arch if args.cuda == "yes" or (args.cuda == "auto" and gpu_present()) else None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="jitflow-cold-") as tmp:
        if args.bytecode:
            BYTECODE["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "bytecode")
            subprocess.run([sys.executable, "-c", "import compileall, sys; sys.exit(not compileall.compile_dir("
                            f"{str(ROOT / 'jitflow')!r}, quiet=1))"], env=fresh_env(Path(tmp) / "bytecode-home"),
                           check=True)
        lines = [] if args.skip_first else first_builds(Path(tmp), args.runs, arch)
        names = [m for m in args.models.split(",") if m]
        if not args.skip_models:
            lines += models(Path(tmp), args.runs, names, arch)
        if args.cpu_levels:
            lines += cpu_levels(Path(tmp), args.runs, names, [lv for lv in args.cpu_levels.split(",") if lv],
                                args.calls)
    print(f"cold start, median of {args.runs} fresh processes, {os.cpu_count()} cores"
          f"{', jitflow as bytecode' if args.bytecode else ''}; "
          f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'case':<{WIDTH}}{'jitflow':>12}{'TVM':>12}{'ratio':>9}   goal")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
