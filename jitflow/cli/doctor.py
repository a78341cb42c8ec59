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
    from ..config import resolve_remote
    from ..doctor.checks import run_checks
    from ..errors import InvalidInputError

    try:
        remote = resolve_remote()
    except InvalidInputError:
        remote = None   # run_checks reports the bad setting
    return run_checks(cuda=cuda) + cpu_level_checks() + (shared_tier_checks(remote) if remote and remote.url else [])


def cpu_level_checks() -> list[Any]:
    """The CPU level builds here take (JITFLOW_CPU_LEVEL, else the baseline) and whether this CPU runs
    what they build: a library built for more than this CPU has is refused when loaded here. Optional:
    a build machine may build for others on purpose. None where the machine or the setting is not one
    jitflow builds for (run_checks reports a bad setting)."""
    from ..config import resolve_cpu_level
    from ..doctor.checks import Check
    from ..errors import JitflowError
    from ..runtime import cpu_features
    from ..targets import cpu_level, hosts

    host = hosts.machine_host()
    if host is None:
        return []
    try:
        name, where = resolve_cpu_level()
    except JitflowError:
        return []
    if name is not None and name not in (cpu_level.BASELINE, *cpu_level.choices(host)):
        other = next(h for h in cpu_level.LEVELS if name in cpu_level.choices(h))
        return [Check("CPU level", False, f"JITFLOW_CPU_LEVEL={name} is a level of {other} hosts: builds for "
                                          f"this machine ({host}) refuse it, cross builds for {other} take it",
                      f"unset it, or set it where every build is for {other}", required=False)]
    try:
        cpu = cpu_features.this_cpu()
        level = cpu_level.resolve(name, host, lambda: cpu.features, host, where)
    except JitflowError as exc:
        return [Check("CPU level", False, str(exc), "", required=False)]
    reached = cpu_level.reached(host, cpu.features)
    model = f" ({cpu.model})" if cpu.model else ""
    if level is None:
        note = cpu_level.speed_note(host, cpu.features)
        return [Check("CPU level", True, f"builds for {cpu_level.BASELINES[host]} (the default: any "
                                         f"{host.split('-')[0]} CPU); this CPU{model} runs up to {reached}"
                                         + (f"; {note}" if note else ""))]
    chosen = f"{level.name} = {level.zig_cpu}" if level.name == cpu_level.NATIVE else level.name
    lacks = cpu_features.missing(level.needs)
    if not lacks:
        return [Check("CPU level", True, f"builds for {chosen} (JITFLOW_CPU_LEVEL); this CPU{model} runs it")]
    return [Check("CPU level", False,
                  f"builds for {chosen} (JITFLOW_CPU_LEVEL), and this CPU{model} lacks {', '.join(lacks)}: "
                  "what it builds will not load here",
                  f"set JITFLOW_CPU_LEVEL={reached} or unset it, unless the libraries are for other machines",
                  required=False)]


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
    from ..toolchain.zig_cc import link, zig, zig_cache

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
