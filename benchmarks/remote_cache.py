"""Fresh-process time to a callable function through the shared cache tier (a local redis-server):
a shared-tier hit with an empty local cache, against a local hit and a full build, in one run.

    python benchmarks/remote_cache.py [--runs 5]

Needs redis-server and the redis package (pip install 'jitflow[redis]'). CPU target, vector add.
'to callable' starts after the imports and the module's construction; 'process' is the whole run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from redis_server import RedisServer, redis_missing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh_process  # noqa: E402

CHILD = """
import time
t0 = time.perf_counter()
import sys
sys.path[:0] = {paths!r}
import json, tvm, jitflow, kernels
t1 = time.perf_counter()
mod = kernels.vecadd()
t2 = time.perf_counter()
exe = jitflow.compile(mod, "c")
f = exe["main"]
t3 = time.perf_counter()
assert exe.build_info.outcome == {expect!r}, exe.build_info
import redis  # already imported where the tier was used: then this costs nothing
t4 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "module": t2 - t1, "callable": t3 - t2, "redis import": t4 - t3}}))
"""


def run_child(expect: str, env: dict[str, str]) -> dict[str, float]:
    code = CHILD.format(paths=[str(ROOT), str(ROOT / "tests")], expect=expect)
    return fresh_process.run(code, env, expect)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    why = redis_missing()
    if why:
        raise SystemExit(f"benchmarks/remote_cache.py: {why}")
    server = RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = {k: v for k, v in os.environ.items() if not k.startswith("JITFLOW_")}
            base["JITFLOW_ZIG_CACHE_DIR"] = str(Path(tmp) / "zig")
            tier = dict(base, JITFLOW_REMOTE_CACHE=server.url, JITFLOW_REMOTE_CACHE_KEY="benchmark-signing-key")
            fresh = iter(range(10**6))

            def local(env: dict[str, str], folder: str | None = None) -> dict[str, str]:
                return dict(env, JITFLOW_CACHE_DIR=str(Path(tmp) / (folder or f"local{next(fresh)}")))

            run_child("built", local(base))  # zig's one-time libc work, so that builds measure builds
            results: dict[str, list[dict[str, float]]] = {
                "local hit": [], "shared-tier hit": [], "full build (tier on)": [], "full build (no tier)": []}
            run_child("built", local(tier, "kept"))
            for _ in range(args.runs):
                results["local hit"].append(run_child("hit", local(tier, "kept")))
                results["shared-tier hit"].append(run_child("shared", local(tier)))
                server.admin().flushall()
                results["full build (tier on)"].append(run_child("built", local(tier)))
                results["full build (no tier)"].append(run_child("built", local(base)))
            size = max(len(server.admin().get(name)) for name in server.entry_names())
    finally:
        server.close()
    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    build = med["full build (no tier)"]["callable"]
    print(f"shared cache tier (redis-server on loopback, signed entry of {size / 1024:.0f} KB), target c, "
          f"vector add 1024, median of {args.runs} fresh processes")
    print(f"{'path':<24}{'to callable':>14}{'process':>12}{'vs build':>10}")
    for name, m in med.items():
        print(f"{name:<24}{m['callable'] * 1000:>11.1f} ms{m['process'] * 1000:>9.0f} ms"
              f"{build / m['callable']:>9.1f}x")
    print(f"(imports {med['local hit']['imports'] * 1000:.0f} ms and module construction "
          f"{med['local hit']['module'] * 1000:.0f} ms are the same on every path; importing the redis "
          f"package, part of each tier row, takes {med['full build (no tier)']['redis import'] * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
