"""Unpacking a cache bundle of 100 entries (small CPU kernels) against `tar -x` of the same file.

    python benchmarks/unpack.py [--entries 100] [--runs 5] [--cache DIR]

The kernels are built once into a cache (DIR, by default a folder under the temporary folder that
later runs reuse) and packed; then each run unpacks the bundle into an empty cache, every file
checked against the manifest and every entry against the cache's checks, then published under its
key's lock with the counters kept: `jitflow.cache.unpack()` in a fresh interpreter, timed after its
imports, and the `jitflow cache unpack` command (its start and imports included), against
`tar -xf` into an empty folder. Medians of `--runs` of the wall time and of the CPU time (user and system: on a busy
shared machine the wall time of a Python process moves with the load far more than tar's);
throughput is the bundle's bytes over the wall time. Goal: unpack within 2x of `tar -x`.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUILD = """
import jitflow, kernels
exes = [jitflow.compile(kernels.axpb(1000.0 + i), "c") for i in range({n})]
failed = [r for r in jitflow.build_all(exes) if not r.ok]
assert not failed, failed[0].error
print(*(exe.key for exe in exes))
"""

#: the API in a fresh interpreter, timed after the modules it uses are imported (as in an application
#: that unpacks at start-up)
API = """
import json, resource, sys, tarfile, time
import jitflow.cache, jitflow.cache.deploy.bundle_unpack, jitflow.cache.door, jitflow.config, jitflow.doctor.checks
import jitflow.cache.store.admin, jitflow.cache.store.location, jitflow.cache.store.counters, jitflow.cache.store.key_lock
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
start, c = time.perf_counter(), cpu()
result = jitflow.cache.unpack(sys.argv[1], cache_dir=sys.argv[2])
print(json.dumps([time.perf_counter() - start, cpu() - c, len(result.installed)]))
"""


def run(args: list[str], env: dict[str, str]) -> str:
    return subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout


def _cpu() -> float:
    """CPU seconds (user and system) of this process and of its finished children."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def timed(action) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of action()."""
    start, cpu = time.perf_counter(), _cpu()
    action()
    return time.perf_counter() - start, _cpu() - cpu


def prepare(description: str, **settings: str) -> tuple[argparse.Namespace, dict[str, str], list[str]]:
    """The command line (--entries, --runs, --cache), the environment of the timed commands (with
    `settings`), and the keys of the kernels built into the cache: what this benchmark and rollout.py
    start from."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "jitflow-unpack-bench")
    args = parser.parse_args()
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(args.cache), **settings,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    return args, env, run([sys.executable, "-c", BUILD.format(n=args.entries)], env).split()


def main() -> None:
    args, env, keys = prepare(__doc__.splitlines()[0])
    jitflow = [sys.executable, "-m", "jitflow", "cache"]
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle.tar"
        packed = json.loads(run(jitflow + ["pack", str(bundle), "--json", *(f"--key={k}" for k in keys)], env))
        size = packed["bytes"]
        files = sum(len(e["files"]) for e in packed["entries"])
        print(f"bundle: {len(packed['entries'])} entries, {files} files, {size / 1e6:.2f} MB")
        times: dict[str, list[tuple[float, float]]] = {"tar -x": [], "unpack() after imports": [],
                                                       "jitflow cache unpack": []}
        for n in range(args.runs):
            dest = Path(tmp) / f"tar{n}"
            dest.mkdir()
            times["tar -x"].append(timed(lambda: run(["tar", "-xf", str(bundle), "-C", str(dest)], env)))
            wall, cpu, installed = json.loads(run([sys.executable, "-c", API, str(bundle), str(Path(tmp) / f"api{n}")],
                                                  env))
            assert installed == len(keys), installed
            times["unpack() after imports"].append((wall, cpu))
            command = jitflow + ["unpack", str(bundle), "--cache-dir", str(Path(tmp) / f"cli{n}")]
            times["jitflow cache unpack"].append(timed(lambda: run(command, env)))
            for folder in ("tar", "api", "cli"):
                shutil.rmtree(Path(tmp) / f"{folder}{n}")
        base = statistics.median(t for t, _ in times["tar -x"])
        base_cpu = statistics.median(c for _, c in times["tar -x"])
        for name, values in times.items():
            wall = statistics.median(t for t, _ in values)
            cpu = statistics.median(c for _, c in values)
            print(f"{name:<22} {wall * 1e3:8.1f} ms  {size / wall / 1e6:6.1f} MB/s  {wall / base:5.2f}x tar -x;  "
                  f"CPU {cpu * 1e3:7.1f} ms  {cpu / base_cpu:5.2f}x  (medians of {len(values)})")

if __name__ == "__main__":
    main()
