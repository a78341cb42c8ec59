"""`jitflow cache ls|info|stats|prune|clear|pack|unpack|check`: see and manage the local cache (prune and clear:
cache_prune.py; pack and unpack: cache_bundle.py; check: cache_check.py)."""
from __future__ import annotations

import argparse
from typing import Any

from . import cache_bundle, cache_check, cache_prune, cache_stats
from .cache_common import (ENTRY_HEADER, SIZE_COLUMN, cache_dir_option, entry_row, json_option, note_refused,
                           open_cache)
from .exit_codes import EXIT_NO, EXIT_OK
from .output import dumps, human_size, table

LS_SCHEMA = "jitflow.cache-ls/1"
INFO_SCHEMA = "jitflow.cache-info/1"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="list, measure, count, prune, clear, pack, unpack or check the cache",
                       description="See and manage jitflow's cache (JITFLOW_CACHE_DIR).")
    cache_dir_option(p)
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    ls = csub.add_parser("ls", help="one line per entry: key, module, target, host, size, times, options",
                         description="List the cache's entries, most recently used first: the key, the module "
                                     "as it was built (FILE.py:NAME, compile(name=), else its functions), the "
                                     "target with its CPU level, the host, the size, when it was made and last "
                                     "used, and the options that set it apart from a default build.")
    json_option(ls, LS_SCHEMA)
    ls.set_defaults(func=run_ls)
    info = csub.add_parser("info", help="location, entries by host, sizes (with zig's cache), cap, shared tier",
                           description="Exit status 1 when the cache folder cannot be used.")
    json_option(info, INFO_SCHEMA)
    info.set_defaults(func=run_info)
    for action in (ls, info, *cache_prune.register(csub), *cache_stats.register(csub),
                   *cache_bundle.register(csub), *cache_check.register(csub)):
        cache_dir_option(action, argparse.SUPPRESS)   # also after the action: cache ls --cache-dir DIR


def run_ls(args: argparse.Namespace) -> int:
    from ..cache.store.admin import entries

    settings, cache = open_cache(args)
    rows = sorted(entries(cache), key=lambda e: e.last_used, reverse=True)
    if args.json:
        print(dumps({"schema": LS_SCHEMA, "location": str(settings.cache_dir),
                     "entries": [e.to_json() for e in rows]}))
    elif not rows:
        print(f"no entries in {settings.cache_dir}")
    else:
        print("\n".join(table(ENTRY_HEADER, [entry_row(e) for e in rows], right=[SIZE_COLUMN])))
    note_refused(rows)
    return EXIT_OK


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def info_data(settings: Any, cache: Any) -> dict[str, Any]:
    """What `cache info` reports, in its JSON shape (jitflow.cache-info/1)."""
    from ..cache.store import location
    from ..cache.store.admin import entries, folder_size

    rows = entries(cache)
    note_refused(rows)
    hosts: dict[str, dict[str, int]] = {}
    for e in rows:
        per_host = hosts.setdefault(e.host, {"entries": 0, "size": 0})
        per_host["entries"] += 1
        per_host["size"] += e.size
    size = sum(e.size for e in rows)
    from ..toolchain.zig_cc import zig_cache

    zig_dir = settings.zig_cache_dir or zig_cache.default_location()      # shared by every cache folder
    zig_size = folder_size(zig_dir)
    shared = None
    if settings.remote.url:
        from ..cache.shared.stats import COUNTERS, machine_stats

        counts = machine_stats(cache.root)
        problem = settings.remote.url_problem
        shared = {"url": None if problem else _without_password(settings.remote.url), "problem": problem,
                  "counters": {n: counts.get(n, 0) for n in COUNTERS}}
    return {"schema": INFO_SCHEMA, "location": str(settings.cache_dir), "exists": settings.cache_dir.exists(),
            "entries_folder": str(cache.root),
            "enabled": settings.cache_enabled, "readonly": settings.cache_readonly,
            "problem": location.open_cache(settings).problem() if settings.cache_enabled else None,
            "entries": len(rows), "size": size, "cap": settings.cache_max_size, "hosts": hosts,
            "zig_cache": {"path": str(zig_dir), "size": zig_size},
            "total_size": size + zig_size, "shared": shared}


def _enabled_text(d: dict[str, Any]) -> str:
    if d["problem"] and d["readonly"]:
        return f"no: {d['problem']} (read-only: every lookup is a miss; set JITFLOW_CACHE_DIR)"
    if d["problem"]:
        return f"no: {d['problem']} (builds use a per-user temporary cache instead; set JITFLOW_CACHE_DIR)"
    if d["readonly"]:
        return ("read-only (JITFLOW_CACHE=readonly: lookups only, nothing built or written; `cache prune`, `clear`, "
                "`unpack` and `stats --zero` refuse to change it)")
    return "yes" if d["enabled"] else "no (JITFLOW_CACHE=0: every build uses a temporary folder)"


def run_info(args: argparse.Namespace) -> int:
    settings, cache = open_cache(args, check=False)
    d = info_data(settings, cache)
    if args.json:
        print(dumps(d))
    else:
        hosts = ", ".join(f"{h} {v['entries']} ({human_size(v['size'])})" for h, v in sorted(d["hosts"].items()))
        where = d["location"] + ("" if d["exists"] else " (does not exist: a build creates it)")
        lines = [("location", where), ("enabled", _enabled_text(d)),
                 ("entries", f"{d['entries']} ({human_size(d['size'])})"), ("hosts", hosts or "-"),
                 ("cap", f"{human_size(d['cap'])} (JITFLOW_CACHE_MAX_SIZE)"),
                 ("zig cache", f"{human_size(d['zig_cache']['size'])} in {d['zig_cache']['path']}"),
                 ("total", human_size(d["total_size"]))]
        if d["shared"]:
            shown = ", ".join(f"{name.replace('_', ' ')} {count}"     # every counter the JSON has
                              for name, count in d["shared"]["counters"].items())
            where = d["shared"]["url"] or f"off: {d['shared']['problem']}"
            lines.append(("shared", f"{where} ({shown}, on this machine)"))
        width = max(len(name) for name, _ in lines) + 2
        print("\n".join(f"{name + ':':<{width}}{value}" for name, value in lines))
    return EXIT_NO if d["problem"] else EXIT_OK

