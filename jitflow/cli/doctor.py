"""`jitflow doctor` and `jitflow warm`: check a machine, and do the slow first-use work up front."""
from __future__ import annotations

import argparse
import tempfile
import time
from itertools import groupby
from pathlib import Path
from typing import Any

from .exit_codes import EXIT_NO, EXIT_OK
from .output import dumps, plural

DOCTOR_SCHEMA = "jitflow.doctor/1"


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("doctor", help="check TVM, zig, the CUDA compilers, the GPU and the cache",
                       description="Check what jitflow needs; exit status 1 when something required is missing.")
    d.add_argument("--cpu", action="store_true", help="skip the CUDA checks (CPU-only use)")
    d.add_argument("--json", action="store_true", help=f"JSON instead of text (schema {DOCTOR_SCHEMA}, docs/cli.md)")
    d.set_defaults(func=run_doctor)
    w = sub.add_parser("warm", help="do zig's one-time work now (for Dockerfiles and new machines)",
                       description="Compile and link a small C library with zig for each host, so that the "
                                   "first jit() on this machine or image does not pay for zig's set-up "
                                   "(milliseconds: the default path needs no warming).")
    w.add_argument("--host", action="append", default=None, metavar="TRIPLE",
                   help="host triple to warm, repeatable (default: this machine's)")
    w.set_defaults(func=run_warm)


def _checks(cuda: bool) -> list[Any]:
    from ..cache.shared.backend import check as shared_tier_checks
    from ..checks import run_checks
    from ..config import resolve_remote
    from ..errors import InvalidInputError

    try:
        remote = resolve_remote()
    except InvalidInputError:
        remote = None   # run_checks reports the bad setting
    return run_checks(cuda=cuda) + (shared_tier_checks(remote) if remote and remote.url else [])


def _mark(check: Any) -> str:
    return "[ok]" if check.ok else ("[!!]" if check.required else "[--]")


def _line(check: Any, detail: str, indent: str = "") -> list[str]:
    out = [f"{indent}{_mark(check)} {detail}"]
    if not check.ok and check.fix:
        out.append(f"{indent}       fix: {check.fix}")
    return out


def _prefix(detail: str) -> str:
    return detail.split(": ", 1)[0] if ": " in detail else ""


def render(checks: list[Any]) -> list[str]:
    """One line per check; the checks of one part (the shared tier's) under one heading, the words they
    all start with ("Redis at URL") said once."""
    lines: list[str] = []
    for name, group in groupby(checks, key=lambda c: c.name):
        items = list(group)
        if len(items) == 1:
            lines += _line(items[0], f"{name}: {items[0].detail}")
            continue
        common = _prefix(items[0].detail)
        shared = common and sum(_prefix(c.detail) == common for c in items) > 1
        lines.append(f"{name}" + (f" ({common}):" if shared else ":"))
        for c in items:
            detail = c.detail[len(common) + 2:] if shared and _prefix(c.detail) == common else c.detail
            lines += _line(c, detail, indent="  ")
    return lines


def run_doctor(args: argparse.Namespace) -> int:
    checks = _checks(cuda=not args.cpu)
    failed = sum(1 for c in checks if not c.ok and c.required)
    warnings = sum(1 for c in checks if not c.ok and not c.required)
    if args.json:
        print(dumps({"schema": DOCTOR_SCHEMA, "ok": not failed, "failed": failed, "warnings": warnings,
                     "checks": [{"name": c.name, "ok": c.ok, "required": c.required, "detail": c.detail,
                                 "fix": None if c.ok else c.fix or None} for c in checks]}))
    else:
        summary = "all required checks passed" if not failed else f"{plural(failed, 'required check')} failed"
        print("\n".join(render(checks) + [summary + (f" ({plural(warnings, 'warning')})" if warnings else "")]))
    return EXIT_NO if failed else EXIT_OK


def run_warm(args: argparse.Namespace) -> int:
    from ..config import resolve
    from ..targets import DEFAULT_HOST, machine_host
    from ..targets.hosts import normalize
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
    return EXIT_OK
