"""`jitflow cache check`: will every entry of a bundle, or of an unpacked cache, serve on this host?"""
from __future__ import annotations

import argparse

from .cache_bundle import trust_option
from .cache_common import json_option
from .exit_codes import EXIT_NO, EXIT_OK
from .output import dumps, plural, table


def register(csub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    p = csub.add_parser("check", help="will every entry serve here? key inputs, host, GPU, who can read it",
                        description="Run where the entries will serve, before serving (no GPU needed). For each "
                                    "entry of BUNDLE (read, not installed) or of the cache (--cache-dir, after "
                                    "unpack): whether this environment computes the same key inputs (tool "
                                    "versions, pipelines, the cache salt, the CUDA compiler), whether this host "
                                    "can run it (host triple and glibc, the CPU level's features, SASS or PTX for "
                                    "the GPU), and whether the serving user can read it. Exit status 0 when every "
                                    "entry will serve, 1 when one will not, 2 for bad input.")
    p.add_argument("bundle", metavar="BUNDLE.tar", nargs="?",
                   help="a bundle to check before unpacking it (default: check the cache)")
    p.add_argument("--arch", metavar="sm_XY",
                   help="the arch of the GPU the entries will serve on (default: the visible GPU's)")
    p.add_argument("--user", metavar="NAME",
                   help="the user who will serve the cache read-only (default: this user; a cache only)")
    trust_option(p)
    json_option(p, "jitflow.cache-check/1")
    p.set_defaults(func=run_check)
    return [p]


def run_check(args: argparse.Namespace) -> int:
    from ..cache.deploy.rollout import check

    report = check(args.bundle, cache_dir=args.cache_dir, arch=args.arch, user=args.user, trust=args.trust)
    if args.json:
        print(dumps(report.to_json()))
        return EXIT_OK if report.serves else EXIT_NO
    rows = []
    for e in report.entries:
        reasons = [f"{what}: {'the cache folder (below)' if why == report.access else why}"
                   for what, found in (("inputs", e.inputs), ("host", e.host), ("access", e.access)) for why in found]
        rows.append(["ok" if e.serves else "FAILS", e.key[:12], e.label, e.target, "; ".join(reasons) or "-"])
    if rows:
        print("\n".join(table(["", "key", "module", "target", "why not"], rows)))
    failing = sum(not e.serves for e in report.entries)
    lines = [f"checked {plural(len(report.entries), 'entry', 'entries')} of {report.source}: "
             + (report.problem or f"{len(report.entries) - failing} will serve here, {failing} will not")]
    if report.origin:
        lines.append(report.origin)
    lines.append(f"assumed GPU: {report.gpu}")
    if report.user:
        lines.append(f"serving user: {report.user}, read-only (JITFLOW_CACHE=readonly)"
                     + (f": {report.access}" if report.access else ""))
    compared = f"not compared: {report.inputs_note}" if report.inputs_note else "compared with this environment's"
    lines.append(f"key inputs: {compared}")
    print("\n".join(lines))
    return EXIT_OK if report.serves else EXIT_NO
