"""Fresh-process time to a callable function: jitflow hit, jitflow miss, and TVM's own path.

    python benchmarks/warm_start.py [--target c|cuda] [--arch sm_90] [--runs 5] [--model vecadd|mlp] [--profile]

--model mlp builds a Relax MLP (784-512-10, float32, batch 32, weights bound in the module) and
times a callable VM function: jitflow.compile(...).vm()["main"] against tvm.compile(...) +
tvm.relax.VirtualMachine(...)["main"].

Each figure is the median over fresh interpreters. 'to callable' starts after the imports and
the module's construction (what jitflow can change); 'process' is the whole interpreter run. The
imports are those of each path's API: `import tvm` for TVM's, and for jitflow's `import jitflow` plus
the compile path that `jitflow.compile` imports on first use (printed apart in the last line).
--profile prints a cProfile of the timed span of the first hit process (on stderr; timings with it
are not comparable).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh_process  # noqa: E402

CHILD = """
import time
t0 = time.perf_counter()
import sys
sys.path[:0] = {paths!r}
import tvm, jitflow, jitflow.runtime.load, kernels, models
t_api = time.perf_counter()
import jitflow.executable   # what jitflow.compile imports on first use, as `import tvm` brings tvm.compile
t1 = time.perf_counter()
mod = {make}
t_mod = time.perf_counter()
if {target!r} == "cuda":   # the CUDA context costs every path the same; create it before timing
    jitflow.runtime.load.ensure_cuda_backend()
    tvm.runtime.empty((1,), "float32", tvm.cuda(0))
__import__("gc").collect()   # the imports' garbage (torch's, TVM's): collected here, not in a timed span
if {profile!r}:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
t2 = time.perf_counter()
if {mode!r} == "tvm":
    target = {tvm_target}
    ex = tvm.compile(mod, target=target)
    f = tvm.relax.VirtualMachine(ex, {device})["main"] if {vm!r} else ex.jit()["main"]
else:
    exe = jitflow.compile(mod, {target!r}, arch={arch!r})
    f = exe.vm({device})["main"] if {vm!r} else exe["main"]
    assert exe.build_info.outcome == ("hit" if {mode!r} == "hit" else "built"), exe.build_info
t3 = time.perf_counter()
if {profile!r}:
    import pstats
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
print(json.dumps({{"imports": t1 - t0, "api": t1 - t_api, "module": t_mod - t1, "device": t2 - t_mod, "callable": t3 - t2}})
      if (json := __import__("json")) else "")
"""


MODELS = {"vecadd": "vector add 1024", "mlp": "Relax MLP 784-512-10 (batch 32)"}


def run_child(mode: str, target: str, arch: str | None, env: dict[str, str],
              model: str = "vecadd", profile: bool = False) -> dict[str, float]:
    if target == "cuda":
        make = "kernels.vecadd_cuda()"
        tvm_target = f"tvm.target.Target({{'kind': 'cuda', 'arch': {arch!r}}})"
        device = "tvm.cuda(0)"
    else:
        make = "kernels.vecadd()"
        tvm_target = "'c'"
        device = "tvm.cpu(0)"
    if model == "mlp":
        make = "models.mlp(batch=32, d_in=784, hidden=512, d_out=10)"
    code = CHILD.format(paths=[str(ROOT), str(ROOT / "tests")], make=make, mode=mode, target=target,
                        arch=arch, tvm_target=tvm_target, device=device, vm=model == "mlp", profile=profile)
    return fresh_process.run(code, env, mode, show_stderr=profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="c", choices=["c", "cuda"])
    parser.add_argument("--arch", default=None, help="CUDA arch (default: sm_90)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="vecadd", choices=sorted(MODELS))
    parser.add_argument("--profile", action="store_true", help="cProfile the first hit (stderr)")
    args = parser.parse_args()
    arch = (args.arch or "sm_90") if args.target == "cuda" else None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JITFLOW_ZIG_CACHE_DIR=str(Path(tmp) / "zig"))
        env.pop("JITFLOW_CACHE", None)
        # warm zig's one-time libc work so that 'miss' measures a build, not machine set-up
        run_child("miss", args.target, arch, dict(env, JITFLOW_CACHE_DIR=str(Path(tmp) / "warmup")), args.model)
        tvm_name = "tvm.compile()+VM" if args.model == "mlp" else "tvm.compile().jit()"
        results: dict[str, list[dict[str, float]]] = {"jitflow hit": [], "jitflow miss": [], tvm_name: []}
        hit_env = dict(env, JITFLOW_CACHE_DIR=str(Path(tmp) / "hit"))
        run_child("miss", args.target, arch, hit_env, args.model)
        for i in range(args.runs):
            results["jitflow hit"].append(run_child("hit", args.target, arch, hit_env, args.model,
                                                    profile=args.profile and i == 0))
            miss_env = dict(env, JITFLOW_CACHE_DIR=str(Path(tmp) / f"miss{i}"))
            results["jitflow miss"].append(run_child("miss", args.target, arch, miss_env, args.model))
            results[tvm_name].append(run_child("tvm", args.target, arch, env, args.model))
    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    tvm_callable = med[tvm_name]["callable"]
    print(f"warm start, target {args.target}{' ' + arch if arch else ''}, {MODELS[args.model]}, "
          f"median of {args.runs} fresh processes")
    print(f"{'path':<22}{'to callable':>14}{'process':>12}{'vs TVM':>10}")
    for name, m in med.items():
        speedup = tvm_callable / m["callable"]
        print(f"{name:<22}{m['callable'] * 1000:>11.1f} ms{m['process'] * 1000:>9.0f} ms{speedup:>9.1f}x")
    device = (f", CUDA context creation {med['jitflow hit']['device'] * 1000:.0f} ms"
              if args.target == "cuda" else "")
    print(f"(imports {med['jitflow hit']['imports'] * 1000:.0f} ms, of them jitflow's compile path "
          f"{med['jitflow hit']['api'] * 1000:.1f} ms; module construction "
          f"{med['jitflow hit']['module'] * 1000:.0f} ms{device} are the same on every path and not counted)")


if __name__ == "__main__":
    main()
