"""N fresh processes asking for one key at once: how many builds, and how long until all can call.

    python benchmarks/racing.py [--procs 8] [--target c|cuda] [--arch sm_90]

Same run, same module: jitflow on an empty cache against N processes each taking TVM's own path.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sys, json, time
sys.path[:0] = {paths!r}
import tvm, jitflow, kernels
mod = kernels.vecadd_cuda() if {target!r} == "cuda" else kernels.vecadd()
start = time.perf_counter()
if {mode!r} == "tvm":
    target = tvm.target.Target({{"kind": "cuda", "arch": {arch!r}}}) if {target!r} == "cuda" else "c"
    tvm.compile(mod, target=target).jit()["main"]
    outcome = "built"
else:
    exe = jitflow.compile(mod, {target!r}, arch={arch!r})
    exe["main"]
    outcome = exe.build_info.outcome
print(json.dumps({{"outcome": outcome, "callable": time.perf_counter() - start}}))
"""


def race(mode: str, procs: int, target: str, arch: str | None, env: dict[str, str]) -> tuple[list[dict], float]:
    code = textwrap.dedent(CHILD.format(paths=[str(ROOT), str(ROOT / "tests")], mode=mode, target=target,
                                        arch=arch))
    start = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(procs)]
    results = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"{mode} child failed:\n{err}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--target", default="c", choices=["c", "cuda"])
    parser.add_argument("--arch", default=None)
    args = parser.parse_args()
    arch = (args.arch or "sm_90") if args.target == "cuda" else None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JITFLOW_ZIG_CACHE_DIR=str(Path(tmp) / "zig"),
                   JITFLOW_CACHE_DIR=str(Path(tmp) / "warm"))
        env.pop("JITFLOW_CACHE", None)
        race("jitflow", 1, args.target, arch, env)   # zig's one-time libc work, not part of the race
        env["JITFLOW_CACHE_DIR"] = str(Path(tmp) / "cache")
        ours, ours_wall = race("jitflow", args.procs, args.target, arch, env)
        theirs, theirs_wall = race("tvm", args.procs, args.target, arch, env)
    builds = sum(r["outcome"] == "built" for r in ours)
    print(f"{args.procs} processes racing for one key, target {args.target}{' ' + arch if arch else ''}, "
          f"vector add 1024, empty cache")
    print(f"jitflow:             {builds} build(s), {args.procs - builds} hit(s); slowest to callable "
          f"{max(r['callable'] for r in ours) * 1000:.0f} ms; all done in {ours_wall:.2f} s")
    print(f"tvm.compile().jit(): {args.procs} builds; slowest to callable "
          f"{max(r['callable'] for r in theirs) * 1000:.0f} ms; all done in {theirs_wall:.2f} s")


if __name__ == "__main__":
    main()
