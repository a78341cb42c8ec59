"""`jitflow cache ls|info|prune|clear`: see and manage the local cache."""
from __future__ import annotations

import argparse
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="list, measure, prune or clear the cache",
                       description="See and manage jitflow's cache (JITFLOW_CACHE_DIR).")
    p.add_argument("--cache-dir", default=None, help="the cache to work on (default: the configured one)")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    csub.add_parser("ls", help="one line per entry").set_defaults(func=run_ls)
    csub.add_parser("info", help="location, entry count, total size and cap").set_defaults(func=run_info)
    pr = csub.add_parser("prune", help="evict least recently used entries")
    pr.add_argument("--max-size", default=None, help="shrink the cache to this size (e.g. 2GB; default: the cap)")
    pr.add_argument("--older-than", default=None, help="remove entries unused for this long (e.g. 30d, 12h)")
    pr.set_defaults(func=run_prune)
    cl = csub.add_parser("clear", help="remove every entry")
    cl.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cl.set_defaults(func=run_clear)


def _cache(args: argparse.Namespace):
    from ..cache.disk import Cache
    from ..config import resolve

    settings = resolve(cache_dir=args.cache_dir)
    return settings, Cache(settings.cache_dir)


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def run_ls(args: argparse.Namespace) -> int:
    from ..cache.admin import entries

    _, cache = _cache(args)
    rows = sorted(entries(cache), key=lambda e: e.last_used, reverse=True)
    if not rows:
        print(f"no entries in {cache.root}")
        return 0
    print(f"{'key':<14}{'functions':<24}{'target':<22}{'host':<19}{'size':>10}  {'created':<17} {'last used':<17}")
    for e in rows:
        funcs = ",".join(e.functions) if e.readable else "(unreadable)"
        print(f"{e.key[:12]:<14}{funcs[:23]:<24}{e.target[:21]:<22}{e.host[:18]:<19}{human_size(e.size):>10}  "
              f"{_when(e.created):<17} {_when(e.last_used):<17}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    from ..cache.admin import entries

    settings, cache = _cache(args)
    rows = entries(cache)
    total = sum(e.size for e in rows)
    print(f"location:  {cache.root}")
    print(f"entries:   {len(rows)}")
    print(f"size:      {human_size(total)}")
    print(f"cap:       {human_size(settings.cache_max_size)} (JITFLOW_CACHE_MAX_SIZE)")
    print(f"enabled:   {'yes' if settings.cache_enabled else 'no (JITFLOW_CACHE=0)'}")
    if settings.remote.url:
        from ..cache.shared.stats import machine_stats

        counts = machine_stats(cache.root)
        shown = ", ".join(f"{name} {counts.get(name, 0)}" for name in ("hits", "misses", "refusals", "stored"))
        print(f"shared:    {_without_password(settings.remote.url)} ({shown}, on this machine)")
    return 0


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def run_prune(args: argparse.Namespace) -> int:
    from ..cache.admin import prune
    from ..config import parse_duration, parse_size

    settings, cache = _cache(args)
    max_size = parse_size(args.max_size, "--max-size") if args.max_size else settings.cache_max_size
    older = parse_duration(args.older_than, "--older-than") if args.older_than else None
    removed = prune(cache, max_size=max_size, older_than=older)
    print(f"removed {len(removed)} entries ({human_size(sum(e.size for e in removed))})")
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from ..cache.admin import clear, entries

    _, cache = _cache(args)
    count = len(entries(cache))
    if not args.yes:
        if not sys.stdin.isatty():
            print("jitflow: refusing to clear without --yes when not on a terminal", file=sys.stderr)
            return 2
        answer = input(f"remove all {count} entries in {cache.root}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    print(f"removed {clear(cache)} entries")
    return 0
