"""`jitflow doctor` and `jitflow warm`: check a machine, and do the slow first-use work up front."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("doctor", help="check TVM, zig, the CUDA compilers, the GPU and the cache",
                       description="Check what jitflow needs; exit status 1 when something required is missing.")
    d.add_argument("--cpu", action="store_true", help="skip the CUDA checks (CPU-only use)")
    d.set_defaults(func=run_doctor)
    w = sub.add_parser("warm", help="do zig's one-time work now (for Dockerfiles and new machines)",
                       description="Compile and link a small C library with zig for each host, so that the "
                                   "first jit() on this machine or image does not pay for zig's set-up "
                                   "(milliseconds: the default path needs no warming).")
    w.add_argument("--host", action="append", default=None, help="host triple(s) to warm (default: this machine's)")
    w.set_defaults(func=run_warm)


def run_doctor(args: argparse.Namespace) -> int:
    from ..cache.shared.backend import check as shared_tier_checks
    from ..checks import run_checks
    from ..config import resolve_remote

    remote = resolve_remote()
    checks = run_checks(cuda=not args.cpu) + (shared_tier_checks(remote) if remote.url else [])
    failed = 0
    for check in checks:
        mark = "ok" if check.ok else ("!!" if check.required else "--")
        print(f"[{mark}] {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"       fix: {check.fix}")
        failed += (not check.ok) and check.required
    print("all required checks passed" if not failed else f"{failed} required check(s) failed")
    return 1 if failed else 0


def run_warm(args: argparse.Namespace) -> int:
    from ..config import resolve
    from ..target import DEFAULT_HOST, machine_host
    from ..target.hosts import normalize
    from ..toolchain import link, zig, zig_cache

    zig_dir = zig_cache.folder(resolve().zig_cache_dir)
    for host in [normalize(h) for h in args.host] if args.host else [machine_host() or DEFAULT_HOST]:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "warm.c").write_text("#include <math.h>\nint jitflow_warm(double x) { return (int)sqrt(x); }\n")
            zig.compile_object(folder / "warm.c", folder / "warm.o", [], host, zig_dir, folder).wait()
            link.link_shared([folder / "warm.o"], folder / "warm.so", host, zig_dir, folder)
        print(f"warmed zig for {host} in {time.perf_counter() - start:.1f} s (cache {zig_dir})")
    return 0
