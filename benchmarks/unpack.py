"""Unpacking a cache bundle of 100 entries (small CPU kernels) against `tar -x` of the same file.

    python benchmarks/unpack.py [--entries 100] [--runs 5] [--cache DIR]

The kernels are built once into a cache (DIR, by default a folder under the temporary folder that
later runs reuse) and packed; then each run unpacks the bundle into an empty cache, every file
checked against the manifest and every entry against the cache's checks, then published under its
key's lock with the counters kept: `jitflow.cache.unpack()` in this process, and the
`jitflow cache unpack` command (a fresh interpreter, its start included), against `tar -xf` into an
empty folder. Medians of `--runs`; throughput is the bundle's bytes over the time. Goal: unpack
within 2x of `tar -x`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def build(cache: Path, n: int) -> list[str]:
    """The keys of n small CPU kernels, built into `cache` where they are not there yet."""
    os.environ["JITFLOW_CACHE_DIR"] = str(cache)
    import jitflow
    import kernels

    exes = [jitflow.compile(kernels.axpb(1000.0 + i), "c") for i in range(n)]
    results = jitflow.build_all(exes)
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"benchmarks/unpack.py: {len(failed)} builds failed: {failed[0].error}")
    return [exe.key for exe in exes]


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "jitflow-unpack-bench")
    args = parser.parse_args()
    import jitflow.cache

    keys = build(args.cache, args.entries)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle.tar"
        packed = jitflow.cache.pack(bundle, keys=keys, cache_dir=args.cache)
        size = packed.bytes
        files = sum(len(e.files) for e in packed.entries)
        print(f"bundle: {len(packed.entries)} entries, {files} files, {size / 1e6:.2f} MB")
        times: dict[str, list[float]] = {"tar -x": [], "unpack (in process)": [], "jitflow cache unpack": []}
        for run in range(args.runs):
            dest = Path(tmp) / f"tar{run}"
            dest.mkdir()
            times["tar -x"].append(timed(lambda: subprocess.run(["tar", "-xf", str(bundle), "-C", str(dest)],
                                                                check=True)))
            cache = Path(tmp) / f"api{run}"
            result = None

            def api() -> None:
                nonlocal result
                result = jitflow.cache.unpack(bundle, cache_dir=cache)
            times["unpack (in process)"].append(timed(api))
            assert result is not None and len(result.installed) == len(keys), result
            command = [sys.executable, "-m", "jitflow", "cache", "unpack", str(bundle), "--cache-dir",
                       str(Path(tmp) / f"cli{run}")]
            times["jitflow cache unpack"].append(timed(lambda: subprocess.run(command, env=env, check=True,
                                                                              capture_output=True)))
            for folder in (dest, cache, Path(tmp) / f"cli{run}"):
                shutil.rmtree(folder)
        base = statistics.median(times["tar -x"])
        for name, values in times.items():
            median = statistics.median(values)
            print(f"{name:<22} {median * 1e3:8.1f} ms  {size / median / 1e6:7.1f} MB/s  "
                  f"{median / base:5.2f}x tar -x  (median of {len(values)})")


if __name__ == "__main__":
    main()
