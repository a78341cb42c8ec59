"""Checking and verifying a bundle of 100 entries (small CPU kernels) before serving: `jitflow cache check`
against `jitflow cache unpack` of the same bundle, and a signed unpack (`--trust`) against an unsigned one.

    python benchmarks/rollout.py [--entries 100] [--runs 5] [--cache DIR]

The kernels are built once into a cache (DIR, by default the one benchmarks/unpack.py builds and later
runs reuse) and packed twice: unsigned, and signed with an Ed25519 key made by ssh-keygen. Each run
times, in fresh processes, the commands as an image build runs them (their start and imports
included: `check` imports TVM to compute this environment's key inputs, `unpack` does not), and the
Python API after its imports (`check()` with TVM and the key's modules imported first, as in a process
that serves). Every run unpacks into an empty cache. The machine is shared: each figure is the minimum
over the runs (the median beside it), wall and CPU (user and system) time.
Goals: a signed unpack within 1.1x of an unsigned one.
"""
from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from unpack import prepare, run, timed  # noqa: E402

#: the Python API in a fresh interpreter, timed after its imports (argv: what, bundle, cache, [key])
API = """
import json, resource, sys, time
import jitflow.cache, jitflow.cache.deploy.bundle_unpack, jitflow.cache.door, jitflow.config, jitflow.doctor.checks
import jitflow.cache.store.admin, jitflow.cache.store.location, jitflow.cache.store.counters, jitflow.cache.store.key_lock
what, bundle, cache, trust = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if what == "check":
    import tvm, jitflow.cache.deploy.rollout, jitflow.runtime.runs_here
    import jitflow.cache.key.key, jitflow.cache.key.registrations
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
start, c = time.perf_counter(), cpu()
if what == "check":
    report = jitflow.cache.deploy.rollout.check(bundle, trust=trust or None)
    assert report.serves, report.to_json()
    n = len(report.entries)
else:
    n = len(jitflow.cache.unpack(bundle, cache_dir=cache, trust=trust or None).installed)
print(json.dumps([time.perf_counter() - start, cpu() - c, n]))
"""


def main() -> None:
    args, env, keys = prepare(__doc__.splitlines()[0], JITFLOW_TRUSTED_KEYS="")
    jitflow = [sys.executable, "-m", "jitflow", "cache"]
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "bundle-key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        bundles = {}
        for name, sign in (("unsigned", []), ("signed", ["--sign", str(key)])):
            bundles[name] = Path(tmp) / f"{name}.tar"
            packed = json.loads(run(jitflow + ["pack", str(bundles[name]), "--json", *sign,
                                               *(f"--key={k}" for k in keys)], env))
        files = sum(len(e["files"]) for e in packed["entries"])
        print(f"bundle: {len(packed['entries'])} entries, {files} files, {packed['bytes'] / 1e6:.2f} MB "
              f"(signed by {packed['signer']})")
        trust = [f"--trust={key}.pub"]
        commands = {
            "jitflow cache unpack": lambda dest: jitflow + ["unpack", str(bundles["unsigned"]), "--cache-dir", dest],
            "jitflow cache unpack --trust (signed)":
                lambda dest: jitflow + ["unpack", str(bundles["signed"]), "--cache-dir", dest, *trust],
            "jitflow cache check": lambda dest: jitflow + ["check", str(bundles["unsigned"])],
            "jitflow cache check --trust (signed)": lambda dest: jitflow + ["check", str(bundles["signed"]), *trust],
        }
        apis = {"unpack() after imports": ("unpack", "unsigned", []),
                "unpack(trust=) after imports (signed)": ("unpack", "signed", [f"{key}.pub"]),
                "check() after imports": ("check", "unsigned", [])}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*commands, *apis]}
        for n in range(args.runs):
            for name, command in commands.items():
                dest = Path(tmp) / f"dest{n}"
                times[name].append(timed(lambda: run(command(str(dest)), env)))
                shutil.rmtree(dest, ignore_errors=True)
            for name, (what, which, extra) in apis.items():
                dest = Path(tmp) / f"api{n}"
                wall, cpu, count = json.loads(run([sys.executable, "-c", API, what, str(bundles[which]), str(dest),
                                                   *extra], env))
                assert count == len(keys), count
                times[name].append((wall, cpu))
                shutil.rmtree(dest, ignore_errors=True)
        base = min(t for t, _ in times["jitflow cache unpack"])
        for name, values in times.items():
            wall, cpu = min(t for t, _ in values), min(c for _, c in values)
            print(f"{name:<40} {wall * 1e3:8.1f} ms (median {statistics.median(t for t, _ in values) * 1e3:8.1f})"
                  f"  {wall / base:5.2f}x unpack;  CPU {cpu * 1e3:7.1f} ms  (minima of {len(values)})")
        for unsigned, signed in (("jitflow cache unpack", "jitflow cache unpack --trust (signed)"),
                                 ("unpack() after imports", "unpack(trust=) after imports (signed)")):
            ratio = min(t for t, _ in times[signed]) / min(t for t, _ in times[unsigned])
            print(f"signed / unsigned, {unsigned}: {ratio:.2f}x (goal 1.1x)")


if __name__ == "__main__":
    main()
