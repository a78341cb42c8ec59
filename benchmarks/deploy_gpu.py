"""Compile once, never in production, on a GPU: a bundle built on a machine without a GPU, served there.

    python benchmarks/deploy_gpu.py prepare OUTDIR           # where building is allowed (no GPU needed)
    python benchmarks/deploy_gpu.py serve OUTDIR/deploy.tar  # on the GPU machine (TVM with its compiler)
    python benchmarks/deploy_gpu.py serve-runtime OUTDIR/deploy.tar   # the same, runtime-only TVM

`prepare` builds a CUDA Relax model (tests/models.py: mlp) and two CUDA kernels (tests/kernels.py:
vecadd_cuda, matmul_shared) for sm_90 with nvcc, in a private cache with JITFLOW_RECORD, packs exactly
the recorded keys into OUTDIR/deploy.tar and writes the keys' inputs (versions included) to
OUTDIR/versions.json. nvcc, not NVRTC: the key covers the device compiler's version, and nvcc's
release is what both machines share. `serve` unpacks the bundle into an empty cache folder, makes it
read-only (a read-only bind mount where it may, else chmod), and times, in a fresh process with
JITFLOW_CACHE=readonly, each module from process start to its first right result; then the same in a
fresh process with an empty writable cache: the cold build. A read-only miss prints the error and the
key's inputs on both sides. `serve-runtime` loads each entry's lib.so with jitflow.load / load_vm in a
TVM without its compiler (TVM_USE_RUNTIME_LIB=1), where no key can be computed: the record says which
library is which. `--dry` (serve, serve-runtime) stops before anything needs a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT, TESTS = HERE.parent.parent, HERE.parent.parent / "tests"
ARCH, COMPILER = "sm_90", "nvcc"
NAMES = ("mlp", "vecadd", "matmul_shared")


def executable(name: str):
    """The module `name` compiled for sm_90 with nvcc, under the settings of the environment."""
    sys.path.insert(0, str(TESTS))
    import kernels
    import models

    import jitflow

    mod = {"mlp": models.mlp, "vecadd": kernels.vecadd_cuda, "matmul_shared": kernels.matmul_shared}[name]()
    return jitflow.compile(mod, "cuda", arch=ARCH, cuda_compiler=COMPILER, name=name)


def run_and_check(name: str, run) -> None:
    """Call `run` (the first request: a runtime module, or a VM for the model) on the GPU and check the
    numbers against numpy; raises AssertionError on a wrong result."""
    import numpy as np
    import tvm

    sys.path.insert(0, str(TESTS))
    dev = tvm.cuda(0)
    rng = np.random.default_rng(0)
    if name == "mlp":
        import models

        x = rng.standard_normal((4, 16)).astype("float32")
        y = run["main"](tvm.runtime.tensor(x, dev)).numpy()
        np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights()), rtol=1e-4, atol=1e-4)
        return
    n = 1024 if name == "vecadd" else 256
    shape = (n,) if name == "vecadd" else (n, n)
    a, b = rng.standard_normal(shape).astype("float32"), rng.standard_normal(shape).astype("float32")
    c = tvm.runtime.tensor(np.zeros(shape, "float32"), dev)
    run["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    dev.sync()
    np.testing.assert_allclose(c.numpy(), a + b if name == "vecadd" else a @ b, rtol=1e-3, atol=1e-3)


def _ms(since: float) -> float:
    return round((time.time() - since) * 1000, 1)


def child_compiled(dry: bool) -> dict:
    """In a fresh process: each module compiled, looked up or built, loaded and called once (or, dry,
    only looked up), timed from the process's start (JITFLOW_T0, set by the parent before spawning)."""
    t0 = float(os.environ["JITFLOW_T0"])
    import tvm  # noqa: F401

    import jitflow
    from jitflow.errors import CacheMissError

    out: dict = {"import_ms": _ms(t0), "cases": {}}
    for name in NAMES:
        start, case = time.time(), {}
        exe = executable(name)
        try:
            if dry:   # obtain the library (lookup, or build), then show where the GPU is first needed
                case["outcome"] = exe.build().outcome
                try:
                    exe.vm("cuda") if name == "mlp" else exe.jit()
                    case["note"] = "dry: loaded, not called"
                except Exception as exc:  # noqa: BLE001
                    case["note"] = f"dry: not loaded here, needs a CUDA device: {type(exc).__name__}: {str(exc)[:80]}"
            else:
                run_and_check(name, exe.vm("cuda") if name == "mlp" else exe.jit())
                case["outcome"] = exe.build_info.outcome
        except CacheMissError as exc:
            case.update(error=f"CacheMissError: {exc}", inputs=exe.cache_key.inputs)
        except Exception as exc:  # noqa: BLE001 -- a bench reports what failed, case by case
            case["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        case.update(key=exe.key, ms=_ms(start), since_start_ms=_ms(t0))
        out["cases"][name] = case
    return out


def child_runtime(cache: str, keys: dict[str, str], dry: bool) -> dict:
    """In a fresh process with a runtime-only TVM: each entry's lib.so loaded and called once."""
    t0 = float(os.environ["JITFLOW_T0"])
    import jitflow

    out: dict = {"import_ms": _ms(t0), "cases": {}}
    for name in NAMES:
        start, case = time.time(), {"key": keys[name]}
        found = sorted(Path(cache).glob(f"**/{keys[name]}/lib.so"))
        try:
            if not found:
                raise FileNotFoundError(f"no {keys[name]}/lib.so under {cache}")
            case["lib"] = str(found[0])
            if dry:
                case["note"] = "dry: found only, no GPU call"
            else:
                lib = jitflow.load_vm(found[0], "cuda") if name == "mlp" else jitflow.load(found[0])
                run_and_check(name, lib)
                case["outcome"] = "loaded"
        except Exception as exc:  # noqa: BLE001
            case["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        case.update(ms=_ms(start), since_start_ms=_ms(t0))
        out["cases"][name] = case
    return out


def fresh_process(args: list[str], env: dict[str, str]) -> tuple[dict | None, float, str]:
    """Run this script's child mode in a fresh Python: (its JSON, the process's wall ms, its stderr)."""
    t0 = time.time()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               JITFLOW_T0=repr(t0), JITFLOW_RECORD="", **env)
    proc = subprocess.run([sys.executable, str(HERE), *args], env=env, capture_output=True, text=True)
    wall = _ms(t0)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if lines else None), wall, proc.stderr


def prepare(outdir: Path) -> None:
    """Build the three modules in a private cache with a record, pack the record, write the key inputs."""
    outdir.mkdir(parents=True, exist_ok=True)
    record, bundle = outdir / "record.jsonl", outdir / "deploy.tar"
    record.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="jitflow-prepare-") as cache:
        os.environ.update(JITFLOW_CACHE_DIR=cache, JITFLOW_RECORD=str(record), JITFLOW_CACHE="1",
                          JITFLOW_CUDA_COMPILER=COMPILER)
        import jitflow.cache

        versions = {}
        for name in NAMES:
            exe = executable(name)
            info = exe.build()
            versions[name] = {"key": exe.key, "inputs": exe.cache_key.inputs}
            print(f"built  {name:13s} {exe.key[:12]}  {info.outcome} in {info.total * 1000:.0f} ms")
        packed = jitflow.cache.pack(bundle, manifest=record, cache_dir=cache)
    (outdir / "versions.json").write_text(json.dumps(versions, indent=1, sort_keys=True, default=str))
    keys = [json.loads(line)["key"] for line in record.read_text().splitlines()]
    print(f"recorded {len(keys)} keys; packed {len(packed.entries)} entries into {bundle} "
          f"({bundle.stat().st_size / 1024:.1f} KiB)")
    print("key inputs (must match on the serving machine; nvcc's names the gcc it preprocesses with too):")
    for what, value in sorted(_versions(versions["vecadd"]["inputs"]).items()):
        print(f"  {what}: {value}")


def _versions(inputs: dict) -> dict:
    """The tool versions among a key's inputs (flattened one level)."""
    found = {}
    for what, value in inputs.items():
        if isinstance(value, dict):
            found.update({f"{what}.{k}": v for k, v in value.items() if not isinstance(v, (dict, list))})
        elif what in ("jitflow", "tvm", "zig", "cuda_compiler", "recipe", "cuda_floor"):
            found[what] = value
    return found


def listing(folder: Path) -> list[tuple]:
    """Every path under `folder` with its size, modification time and mode."""
    return sorted((str(p), p.lstat().st_size, p.lstat().st_mtime_ns, p.lstat().st_mode) for p in folder.rglob("*"))


def read_only(folder: Path) -> str:
    """Make `folder` read-only for real where this process may (a read-only bind mount of itself: root
    ignores modes), else with chmod; says which."""
    subprocess.run(["chmod", "-R", "a-w", str(folder)], check=False)
    if shutil.which("mount") is None:
        return "chmod -R a-w only (no mount command)" + ("; root ignores it" if os.geteuid() == 0 else "")
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if bind.returncode == 0:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True, text=True)
        if ro.returncode == 0:
            return "read-only bind mount (and chmod -R a-w)"
        subprocess.run(["umount", str(folder)], check=False)
        return f"chmod -R a-w only (remount ro failed: {ro.stderr.strip()[:120]})"
    return f"chmod -R a-w only (bind mount failed: {bind.stderr.strip()[:120] or 'no mount'})" + \
        ("; root ignores it" if os.geteuid() == 0 else "")


def report(label: str, result: dict | None, wall: float, stderr: str, prepared: dict) -> float | None:
    """Print one line per module and a total; on a miss, the key's inputs here against prepare's."""
    if result is None:
        print(f"{label}: the process failed (wall {wall:.0f} ms):\n{stderr[-2000:]}")
        return None
    ok = True
    for name, case in result["cases"].items():
        if "error" in case:
            ok = False
            print(f"{label}  {name:13s} FAILED after {case['ms']:.1f} ms: {case['error']}")
            mine, theirs = _versions(case.get("inputs", {})), _versions(prepared.get(name, {}).get("inputs", {}))
            for what in sorted(set(mine) | set(theirs)) if mine else []:
                mark = "  " if mine.get(what) == theirs.get(what) else "!="
                print(f"    {mark} {what}: here {mine.get(what)!r}, prepare {theirs.get(what)!r}")
            if mine and mine == theirs:
                print("    every input above matches: the module's IR text differs (TVM, numpy or tests/ differ)")
        else:
            extra = "".join(f" ({case[k]})" for k in ("outcome", "note") if k in case)
            print(f"{label}  {name:13s} first request {case['ms']:8.1f} ms  (at {case['since_start_ms']:.1f} ms "
                  f"since process start){extra}")
    total = max((c["since_start_ms"] for c in result["cases"].values()), default=0.0)
    print(f"{label}  all three by {total:.1f} ms since process start (import {result['import_ms']:.1f} ms); "
          f"process wall {wall:.1f} ms")
    return total if ok else None


def _prepared(bundle: Path) -> dict:
    path = bundle.parent / "versions.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def serve(bundle: Path, dry: bool) -> int:
    """Unpack, serve read-only in a fresh process, then build cold in another; print the timings."""
    import jitflow.cache
    import jitflow.errors

    prepared = _prepared(bundle)
    with tempfile.TemporaryDirectory(prefix="jitflow-serve-") as tmp:
        cache = Path(tmp) / "cache"
        try:
            done = jitflow.cache.unpack(bundle, cache_dir=cache)
        except jitflow.errors.JitflowError as exc:
            print(f"unpack refused the bundle: {type(exc).__name__}: {exc}")
            return 1
        print(f"unpacked {len(done.installed)} entries ({done.bytes / 1024:.1f} KiB) into {cache}")
        how, before = read_only(cache), listing(cache)
        print(f"cache folder made read-only: {how}")
        try:
            mode = ["child", "--dry"] if dry else ["child"]
            hit = report("readonly hit", *fresh_process(mode, {
                "JITFLOW_CACHE": "readonly", "JITFLOW_CUDA_COMPILER": COMPILER, "JITFLOW_CACHE_DIR": str(cache),
                "JITFLOW_ZIG_CACHE_DIR": str(Path(tmp) / "zig-never")}), prepared)
            print(f"cache folder after the read-only run: {'unchanged' if listing(cache) == before else 'CHANGED'} "
                  f"(paths, sizes, times, modes)")
        finally:
            if how.startswith("read-only bind"):
                subprocess.run(["umount", str(cache)], check=False)
            subprocess.run(["chmod", "-R", "u+w", str(cache)], check=False)
        cold = report("cold build  ", *fresh_process(mode, {
            "JITFLOW_CACHE": "1", "JITFLOW_CUDA_COMPILER": COMPILER, "JITFLOW_CACHE_DIR": str(Path(tmp) / "cold"),
            "JITFLOW_ZIG_CACHE_DIR": str(Path(tmp) / "zig-cold")}), prepared)
    if hit and cold:
        print(f"summary{' (dry: no GPU calls)' if dry else ''}: first results of all three {hit:.0f} ms from a "
              f"read-only bundle vs {cold:.0f} ms building cold (empty cache and zig cache): {cold / hit:.1f}x")
    return 0 if (hit and cold) or dry else 1


def serve_runtime(bundle: Path, dry: bool) -> int:
    """Unpack (jitflow's checked unpack, else tarfile only to find the libraries) and load in a
    runtime-only TVM."""
    prepared = _prepared(bundle)
    keys = {name: prepared[name]["key"] for name in NAMES if name in prepared}
    if len(keys) < len(NAMES):
        print(f"{bundle.parent / 'versions.json'} is missing or lacks a module: run `prepare` again")
        return 1
    runtime = {"TVM_USE_RUNTIME_LIB": "1"}
    with tempfile.TemporaryDirectory(prefix="jitflow-runtime-") as tmp:
        cache = Path(tmp) / "cache"
        code = "import sys, jitflow.cache; r = jitflow.cache.unpack(sys.argv[1], cache_dir=sys.argv[2]); " \
               "print(len(r.installed))"
        env = dict(os.environ, **runtime,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run([sys.executable, "-c", code, str(bundle), str(cache)], env=env, capture_output=True,
                              text=True)
        if proc.returncode == 0:
            print(f"unpacked {proc.stdout.strip()} entries with jitflow.cache.unpack in the runtime-only TVM")
        else:
            why = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"jitflow.cache.unpack failed in the runtime-only TVM ({why}); FALLBACK: Python's tarfile, "
                  f"only to find the libraries (no digest checks)")
            with tarfile.open(bundle) as tar:
                tar.extractall(cache, filter="data")
        mode = ["child-runtime", str(cache), json.dumps(keys)] + (["--dry"] if dry else [])
        ok = report("runtime-only load", *fresh_process(mode, runtime), prepared)
    return 0 if ok or dry else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{prepare,serve,serve-runtime}")
    sub.add_parser("prepare", help="build and pack the bundle (no GPU needed)").add_argument("outdir", type=Path)
    for name, what in (("serve", "serve the bundle read-only, then build cold (GPU machine)"),
                       ("serve-runtime", "load the bundle's libraries in a runtime-only TVM (GPU machine)")):
        p = sub.add_parser(name, help=what)
        p.add_argument("bundle", type=Path)
        p.add_argument("--dry", action="store_true", help="stop before anything needs a GPU")
    child = sub.add_parser("child")   # the fresh processes, not for users
    child.add_argument("--dry", action="store_true")
    runtime = sub.add_parser("child-runtime")
    runtime.add_argument("cache")
    runtime.add_argument("keys")
    runtime.add_argument("--dry", action="store_true")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.outdir)
    elif args.command == "serve":
        return serve(args.bundle, args.dry)
    elif args.command == "serve-runtime":
        return serve_runtime(args.bundle, args.dry)
    elif args.command == "child":
        print(json.dumps(child_compiled(args.dry), default=str))
    else:
        print(json.dumps(child_runtime(args.cache, json.loads(args.keys), args.dry), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
