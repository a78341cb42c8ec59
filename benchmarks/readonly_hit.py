"""A read-only hit against an ordinary hit, each in a fresh process, on a cache unpacked from a bundle.

    python benchmarks/readonly_hit.py [--runs 7]

A vector add and a Relax MLP (the tests' modules, CPU target "c") are built in one temporary cache,
packed into a bundle and unpacked into another; then fresh interpreters get both from the unpacked
cache, alternating JITFLOW_CACHE=1 (an ordinary hit: it marks the entry used and counts the hit)
and JITFLOW_CACHE=readonly (writes nothing), each going first in every other pair. 'to callable' is
jitflow.compile() to a callable function (the kernel's, then the model's VM function), after the
imports; 'lookups' the cache's part of it (build_info.total of both: find, check and open the
entries); 'process' the whole interpreter's wall time. Medians over the runs. Goal: the read-only hit no slower.
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
import time, sys
sys.path[:0] = {paths!r}
import tvm, jitflow, jitflow.executable, kernels, models
kernel, model = kernels.vecadd(), models.mlp()
__import__("gc").collect()
t0 = time.perf_counter()
exe = jitflow.compile(kernel, "c")
f = exe["main"]
t1 = time.perf_counter()
net = jitflow.compile(model, "c")
g = net.vm("cpu")["main"]
t2 = time.perf_counter()
assert exe.build_info.outcome == net.build_info.outcome == "hit", (exe.build_info, net.build_info)
lookup = exe.build_info.total + net.build_info.total    # the cache's part: find, check, open
print(__import__("json").dumps({{"kernel": t1 - t0, "model": t2 - t1, "lookup": lookup}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    paths = [str(ROOT), str(ROOT / "tests")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
               JITFLOW_PROGRESS="0")
    env.pop("JITFLOW_RECORD", None)
    with tempfile.TemporaryDirectory() as tmp:
        built, served, bundle = Path(tmp) / "built", Path(tmp) / "served", Path(tmp) / "bundle.tar"
        code = CHILD.format(paths=paths).replace('== "hit", (exe', 'in ("hit", "built"), (exe')
        fresh_process.run(code, dict(env, JITFLOW_CACHE_DIR=str(built), JITFLOW_CACHE="1"), "build")
        sys.path[:0] = paths
        import jitflow.cache

        packed = jitflow.cache.pack(bundle, cache_dir=built)
        jitflow.cache.unpack(bundle, cache_dir=served)
        print(f"bundle: {len(packed.entries)} entries, {packed.bytes} bytes; unpacked into a fresh cache")
        times: dict[str, list[dict[str, float]]] = {"ordinary": [], "readonly": []}
        pair = [("ordinary", "1"), ("readonly", "readonly")]
        for run in range(args.runs):
            for mode, value in pair if run % 2 == 0 else pair[::-1]:     # neither always goes first
                times[mode].append(fresh_process.run(CHILD.format(paths=paths),
                                                     dict(env, JITFLOW_CACHE_DIR=str(served), JITFLOW_CACHE=value),
                                                     mode))
    names = ("lookup", "kernel", "model", "process")
    med = {mode: {k: statistics.median(t[k] for t in runs) for k in names} for mode, runs in times.items()}
    for mode, m in med.items():
        print(f"{mode:>9} hit: lookups {m['lookup'] * 1000:.2f} ms, kernel to callable {m['kernel'] * 1000:.1f} ms, "
              f"model to callable {m['model'] * 1000:.1f} ms, process {m['process'] * 1000:.0f} ms "
              f"(median of {args.runs})")
    ratio = {k: med["readonly"][k] / med["ordinary"][k] for k in names}
    print("readonly / ordinary: " + ", ".join(f"{k} {ratio[k]:.2f}x" for k in names)
          + " (goal: no slower, 1.00x or less)")


if __name__ == "__main__":
    main()
