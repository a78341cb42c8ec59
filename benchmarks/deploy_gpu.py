"""Compile once, never in production, on a GPU: a bundle built on a machine without a GPU, served there.

    python benchmarks/deploy_gpu.py prepare OUTDIR                    # where building is allowed (no GPU needed)
    python benchmarks/deploy_gpu.py rollout OUTDIR/deploy.tar         # on the GPU machine, as root: all of it
    python benchmarks/deploy_gpu.py serve OUTDIR/deploy.tar           # a read-only hit against a cold build
    python benchmarks/deploy_gpu.py serve-runtime OUTDIR/deploy.tar   # by label, in a TVM without its compiler

`prepare` builds a CUDA Relax model (tests/models.py: mlp), a kernel (tests/kernels.py: vecadd_cuda) and a
module of two kernels (vecadd_cuda as "add", matmul_shared as "matmul") for sm_90 with the default CUDA
compiler, NVRTC, in a private cache with JITFLOW_RECORD; packs exactly the recorded keys into
OUTDIR/deploy.tar, and writes the keys' inputs to OUTDIR/versions.json. The key covers NVRTC's, nvfatbin's
and CCCL's wheel versions: prepare it in an environment whose wheels are the serving machine's (`cache
check` there names any that differ).

`rollout` runs the deployment as an image would, and checks each step: `jitflow cache check` of the
bundle (the visible GPU, else --arch); root unpacks it into a cache folder whose parents do not exist,
made readable to the serving user (--user, default nobody), and `cache check --user` of the cache; that
user serves it in a fresh process with JITFLOW_CACHE=readonly (each module compiled, a hit, its first
result checked against numpy), then loads each entry by label in a TVM without its compiler
(TVM_USE_RUNTIME_LIB=1: jitflow.load_entry, load_vm_entry); last, root builds the three cold in an
empty cache, and the first-request times are compared. `serve` and `serve-runtime` are two of those
steps alone, as root. `--dry` stops each before anything needs a GPU (the check assumes sm_90).
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT, TESTS = HERE.parent.parent, HERE.parent.parent / "tests"
ARCH = "sm_90"
NAMES = ("mlp", "vecadd", "pair")


def module(name: str):
    """The IRModule of `name`: the model, the kernel, or the module of two kernels."""
    sys.path.insert(0, str(TESTS))
    import kernels
    import models
    import tvm

    if name == "pair":
        return tvm.IRModule({"add": kernels.vecadd_cuda()["main"], "matmul": kernels.matmul_shared()["main"]})
    return models.mlp() if name == "mlp" else kernels.vecadd_cuda()


def executable(name: str):
    """The module `name` compiled for sm_90 with the configured CUDA compiler (NVRTC by default)."""
    import jitflow

    return jitflow.compile(module(name), "cuda", arch=ARCH, name=name)


def run_and_check(name: str, run, device: str = "cuda") -> None:
    """Call `run` (the first request: a library, or a VM for the model) and check the numbers against
    numpy; raises AssertionError on a wrong result. Tensors are torch's where torch is, else TVM's."""
    import numpy as np

    sys.path.insert(0, str(TESTS))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        put, sync = (lambda a: torch.from_numpy(a).to(device)), torch.cuda.synchronize
    else:
        import tvm

        put, sync = (lambda a: tvm.runtime.tensor(a, tvm.cuda(0))), (lambda: None)

    def back(t):
        return t.cpu().numpy() if torch is not None and isinstance(t, torch.Tensor) else t.numpy()
    rng = np.random.default_rng(0)
    if name == "mlp":
        import models

        x = rng.standard_normal((4, 16)).astype("float32")
        y = back(run["main"](put(x)))
        np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights()), rtol=1e-4, atol=1e-4)
        return
    calls = [("main" if name == "vecadd" else "add", 1024)] + ([("matmul", 256)] if name == "pair" else [])
    for function, n in calls:
        shape = (n,) if n == 1024 else (n, n)
        a, b = rng.standard_normal(shape).astype("float32"), rng.standard_normal(shape).astype("float32")
        c = put(np.zeros(shape, "float32"))
        run[function](put(a), put(b), c)
        sync()
        np.testing.assert_allclose(back(c), a + b if n == 1024 else a @ b, rtol=1e-3, atol=1e-3)


def _ms(since: float) -> float:
    return round((time.time() - since) * 1000, 1)


def child_compiled(dry: bool) -> dict:
    """A serving process of the usual kind: each module compiled (its key taken), found, loaded and called
    once (dry: only found), timed from the process's start (JITFLOW_T0, set before it was spawned)."""
    t0 = float(os.environ["JITFLOW_T0"])
    import tvm  # noqa: F401

    import jitflow
    from jitflow.errors import CacheMissError

    out: dict = {"import_ms": _ms(t0), "cases": {}}
    for name in NAMES:
        start, case = time.time(), {}
        exe = executable(name)
        try:
            if dry:
                case["outcome"], case["note"] = exe.build().outcome, "dry: found, not called"
            else:
                run_and_check(name, exe.vm("cuda") if name == "mlp" else exe.jit())
                case["outcome"] = exe.build_info.outcome
        except CacheMissError as exc:
            case.update(error=f"CacheMissError: {exc}")
        except Exception as exc:  # noqa: BLE001 -- a bench reports what failed, case by case
            case["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        case.update(key=exe.key, ms=_ms(start), since_start_ms=_ms(t0))
        out["cases"][name] = case
    return out


def child_runtime(dry: bool) -> dict:
    """A serving process of the smallest image: each entry loaded by its label, no key computed."""
    t0 = float(os.environ["JITFLOW_T0"])
    import jitflow
    from jitflow.cache.named_entry import find

    out: dict = {"import_ms": _ms(t0), "cases": {}}
    for name in NAMES:
        start, case = time.time(), {}
        try:
            if dry:
                found = find(name, target="cuda")[1]
                case.update(key=found.key, note="dry: found, not loaded")
            else:
                run_and_check(name, jitflow.load_vm_entry(name, "cuda") if name == "mlp" else jitflow.load_entry(name))
                case["outcome"] = "loaded by label"
        except Exception as exc:  # noqa: BLE001
            case["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        case.update(ms=_ms(start), since_start_ms=_ms(t0))
        out["cases"][name] = case
    out["tvm imported"] = "tvm" in sys.modules
    out["compiler mapped"] = "libtvm_compiler" in open("/proc/self/maps").read()
    return out


class Runner:
    """Fresh processes of this script's child modes, as root or as another user (from a copy of the code
    that user can read: the checkout may sit in a folder only root can enter)."""

    def __init__(self, user: str | None, top: Path) -> None:
        self.user, self.root = user, ROOT
        if user and os.geteuid() == 0:
            import pwd

            self.account = pwd.getpwnam(user)
            self.root = top / "code"
            for part in ("jitflow", "benchmarks", "tests"):
                shutil.copytree(ROOT / part, self.root / part, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            compileall.compile_dir(self.root, quiet=1, workers=0)
            subprocess.run(["chmod", "-R", "go+rX", str(top)], check=True)
        else:
            self.user = None

    def run(self, args: list[str], env: dict[str, str]) -> tuple[dict | None, float, str]:
        """(the child's JSON, the process's wall ms, its stderr)."""
        t0 = time.time()
        path = [str(self.root), str(self.root / "tests"), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), JITFLOW_T0=repr(t0), JITFLOW_RECORD="", **env)
        command = [sys.executable, str(self.root / "benchmarks" / HERE.name), *args]
        if self.user:     # setpriv as tests/other_user.py runs it (util-linux); subprocess's user= where there is none
            env.update(HOME=tempfile.gettempdir(), PYTHONDONTWRITEBYTECODE="1")
            uid, gid = self.account.pw_uid, self.account.pw_gid
            if shutil.which("setpriv"):
                command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *command]
        who = {"user": uid, "group": gid, "extra_groups": []} if self.user and not shutil.which("setpriv") else {}
        proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(), **who)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        return (json.loads(lines[-1]) if lines else None), _ms(t0), proc.stderr


def listing(folder: Path) -> list[tuple]:
    """Every path under `folder` with its size, modification time and mode."""
    return sorted((str(p), p.lstat().st_size, p.lstat().st_mtime_ns, p.lstat().st_mode) for p in folder.rglob("*"))


def prepare(outdir: Path) -> None:
    """Build the three modules in a private cache with a record, pack the record, write the key inputs."""
    outdir.mkdir(parents=True, exist_ok=True)
    record, bundle = outdir / "record.jsonl", outdir / "deploy.tar"
    record.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="jitflow-prepare-") as cache:
        os.environ.update(JITFLOW_CACHE_DIR=cache, JITFLOW_RECORD=str(record), JITFLOW_CACHE="1")
        import jitflow.cache

        versions = {}
        for name in NAMES:
            exe = executable(name)
            info = exe.build()
            versions[name] = {"key": exe.key, "inputs": exe.cache_key.inputs}
            print(f"built  {name:6s} {exe.key[:12]}  {info.outcome} in {info.total * 1000:.0f} ms")
        packed = jitflow.cache.pack(bundle, manifest=record, cache_dir=cache)
    (outdir / "versions.json").write_text(json.dumps(versions, indent=1, sort_keys=True, default=str))
    print(f"packed {len(packed.entries)} entries into {bundle} ({bundle.stat().st_size / 1024:.1f} KiB)")
    print(f"the CUDA compiler in the keys: {versions['vecadd']['inputs']['versions'].get('cuda_compiler')}")


def report(label: str, result: dict | None, wall: float, stderr: str) -> float | None:
    """Print one line per module and a total; the time of the last first result, None if one failed."""
    if result is None:
        print(f"{label}: the process failed (wall {wall:.0f} ms):\n{stderr[-2000:]}")
        return None
    ok = True
    for name, case in result["cases"].items():
        if "error" in case:
            ok = False
            print(f"{label}  {name:6s} FAILED after {case['ms']:.1f} ms: {case['error']}")
        else:
            extra = "".join(f" ({case[k]})" for k in ("outcome", "note") if k in case)
            print(f"{label}  {name:6s} first request {case['ms']:8.1f} ms  (at {case['since_start_ms']:.1f} ms "
                  f"since process start){extra}")
    total = max((c["since_start_ms"] for c in result["cases"].values()), default=0.0)
    seen = "".join(f"; {k} {result[k]}" for k in ("tvm imported", "compiler mapped") if k in result)
    print(f"{label}  all by {total:.1f} ms since process start (imports {result['import_ms']:.1f} ms){seen}; "
          f"process wall {wall:.1f} ms")
    return total if ok and not result.get("compiler mapped") else None


def _jitflow(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "jitflow", *args], env=env, capture_output=True, text=True)
    print(f"$ jitflow {' '.join(args)}   -> exit {proc.returncode}")
    print("  " + "\n  ".join((proc.stdout + proc.stderr).strip().splitlines()))
    return proc


def rollout(bundle: Path, user: str, arch: str | None, dry: bool) -> int:
    """The whole deployment, each step checked (see the module's docstring)."""
    arch = arch or (ARCH if dry else None)
    failed = []
    if _jitflow("cache", "check", str(bundle), *(["--arch", arch] if arch else [])).returncode != 0:
        failed.append("cache check of the bundle")
    with tempfile.TemporaryDirectory(prefix="jitflow-rollout-") as tmp:
        top = Path(tmp)
        top.chmod(0o755)
        cache = top / "opt" / "app" / "jitflow-cache"                 # its parents do not exist yet
        usage = subprocess.run([sys.executable, "-m", "jitflow", "cache", "unpack", "--help"], capture_output=True,
                               text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout
        readable = ["--readable"] if "--readable" in usage else []     # where unpack can make it readable itself
        if _jitflow("cache", "unpack", str(bundle), "--cache-dir", str(cache), *readable).returncode != 0:
            return 1
        if not readable:
            subprocess.run(["chmod", "-R", "go+rX", str(top / "opt")], check=True)
        if _jitflow("cache", "check", "--cache-dir", str(cache), "--user", user,
                    *(["--arch", arch] if arch else [])).returncode != 0:
            failed.append(f"cache check --user {user}")
        runner, before = Runner(user, top), listing(cache)
        mode = ["--dry"] if dry else []
        served = {"JITFLOW_CACHE": "readonly", "JITFLOW_CACHE_DIR": str(cache),
                  "JITFLOW_ZIG_CACHE_DIR": str(top / "zig-never")}
        who = runner.user or f"uid {os.geteuid()}"
        hit = report(f"{who}, read-only", *runner.run(["child", *mode], served))
        label = report(f"{who}, by label", *runner.run(["child-runtime", *mode], dict(served, TVM_USE_RUNTIME_LIB="1")))
        unchanged = listing(cache) == before
        print(f"the cache folder after serving: {'unchanged' if unchanged else 'CHANGED'} (paths, sizes, times, modes)")
        if not unchanged:
            failed.append("the cache folder changed while it was served")
        cold = report("root, cold build", *Runner(None, top).run(["child", *mode], {
            "JITFLOW_CACHE": "1", "JITFLOW_CACHE_DIR": str(top / "cold"), "JITFLOW_ZIG_CACHE_DIR": str(top / "zig")}))
        failed += [what for what, ok in (("read-only serving", hit), ("loading by label", label), ("cold build", cold))
                   if ok is None]
    if hit and label and cold:
        print(f"summary{' (dry: no GPU calls)' if dry else ''}: first results of all three {hit:.0f} ms read-only "
              f"(full TVM), {label:.0f} ms by label (runtime-only TVM), against {cold:.0f} ms building cold "
              f"(empty cache and zig cache): {cold / hit:.1f}x and {cold / label:.1f}x")
    print("rollout: " + ("every step passed" if not failed else "FAILED: " + ", ".join(failed)))
    return 1 if failed else 0


def serve(bundle: Path, dry: bool, runtime: bool) -> int:
    """As root: unpack, then a read-only hit against a cold build (or, `runtime`, entries by label)."""
    import jitflow.cache

    with tempfile.TemporaryDirectory(prefix="jitflow-serve-") as tmp:
        cache = Path(tmp) / "cache"
        done = jitflow.cache.unpack(bundle, cache_dir=cache)
        print(f"unpacked {len(done.installed)} entries into {cache}")
        runner, mode = Runner(None, Path(tmp)), ["--dry"] if dry else []
        served = {"JITFLOW_CACHE": "readonly", "JITFLOW_CACHE_DIR": str(cache),
                  "JITFLOW_ZIG_CACHE_DIR": str(Path(tmp) / "zig-never")}
        if runtime:
            ok = report("by label", *runner.run(["child-runtime", *mode], dict(served, TVM_USE_RUNTIME_LIB="1")))
            return 0 if ok is not None else 1
        hit = report("readonly hit", *runner.run(["child", *mode], served))
        cold = report("cold build  ", *runner.run(["child", *mode], {
            "JITFLOW_CACHE": "1", "JITFLOW_CACHE_DIR": str(Path(tmp) / "cold"),
            "JITFLOW_ZIG_CACHE_DIR": str(Path(tmp) / "zig-cold")}))
    if hit and cold:
        print(f"summary{' (dry: no GPU calls)' if dry else ''}: first results of all three {hit:.0f} ms from a "
              f"read-only bundle vs {cold:.0f} ms building cold (empty cache and zig cache): {cold / hit:.1f}x")
    return 0 if hit and cold else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{prepare,rollout,serve,serve-runtime}")
    sub.add_parser("prepare", help="build and pack the bundle (no GPU needed)").add_argument("outdir", type=Path)
    for name, what in (("rollout", "check, unpack as root, serve as another user, by label, cold (GPU machine)"),
                       ("serve", "serve the bundle read-only, then build cold (GPU machine)"),
                       ("serve-runtime", "load the bundle's entries by label in a runtime-only TVM (GPU machine)")):
        p = sub.add_parser(name, help=what)
        p.add_argument("bundle", type=Path)
        p.add_argument("--dry", action="store_true", help="stop before anything needs a GPU")
        if name == "rollout":
            p.add_argument("--user", default="nobody", help="who serves the cache (default nobody)")
            p.add_argument("--arch", help="the GPU to check for (default the visible one; sm_90 with --dry)")
    for name in ("child", "child-runtime"):       # the fresh processes, not for users
        sub.add_parser(name).add_argument("--dry", action="store_true")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.outdir)
        return 0
    if args.command == "rollout":
        return rollout(args.bundle, args.user, args.arch, args.dry)
    if args.command in ("serve", "serve-runtime"):
        return serve(args.bundle, args.dry, runtime=args.command == "serve-runtime")
    child = child_compiled if args.command == "child" else child_runtime
    print(json.dumps(child(args.dry), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
