"""`jitflow cache prune` and `jitflow cache clear`: remove entries, and say what went, what stayed and why."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .cache_common import ENTRY_HEADER, SIZE_COLUMN, entry_row, json_option, note_refused, open_cache
from .exit_codes import EXIT_OK, EXIT_USAGE
from .output import age, dumps, human_size, plural, table

PRUNE_SCHEMA = "jitflow.cache-prune/1"


def register(csub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    pr = csub.add_parser("prune", help="evict entries unused for a while, then least recently used ones over the cap",
                         description="Remove entries unused for --older-than, then the least recently used "
                                     "until the cache fits in --max-size (default: the cap). Entries being "
                                     "built or published in the last minute are kept, and listed with why.")
    pr.add_argument("--max-size", default=None, help="shrink the cache to this size (e.g. 2GiB; default: the cap)")
    pr.add_argument("--older-than", default=None, help="remove entries unused for this long (e.g. 30d, 12h)")
    pr.add_argument("--dry-run", action="store_true", help="remove nothing; list what would be removed")
    json_option(pr, PRUNE_SCHEMA)
    pr.set_defaults(func=run_prune)
    cl = csub.add_parser("clear", help="remove every entry",
                         description="Remove every entry of the cache, after asking on a terminal (elsewhere --yes "
                                     "is needed). Entries being built are kept, and listed with why; zig's "
                                     "cache is left alone.")
    cl.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cl.set_defaults(func=run_clear)
    return [pr, cl]


def reason_text(reason: str, e: Any, cap: int | None = None, older_than: float | None = None) -> str:
    """Why an entry went or stayed (admin's reason codes), in words."""
    from ..cache.store import admin

    now = time.time()
    return {
        admin.REMOVED_UNUSED: f"unused for {age(now - e.last_used)}"
                              + (f" (over {age(older_than)})" if older_than else ""),
        admin.REMOVED_OVER_CAP: "least recently used, with the cache over "
                                + (human_size(cap) if cap is not None else "its cap"),
        admin.REMOVED_CLEAR: "clear",
        admin.KEPT_RECENT: f"published {age(now - e.created)} ago: entries younger than "
                           f"{age(admin.GRACE_SECONDS)} are kept (a process may be about to load them)",
        admin.KEPT_BUILDING: "being built: another process holds its build lock",
        admin.KEPT_GONE: "already removed by another process",
        admin.KEPT_ERROR: "could not be removed (see the warning above)",
    }.get(reason, reason)


def _listing(title: str, items: list[tuple[Any, str]], cap: int | None = None,
             older_than: float | None = None) -> list[str]:
    rows = [entry_row(e)[:5] + [reason_text(why, e, cap, older_than)] for e, why in items]
    return [title] + ["  " + line for line in table(ENTRY_HEADER[:5] + ["why"], rows, right=[SIZE_COLUMN])]


def _prune_text(report: Any, before: list[Any], cap: int, older_than: float | None, dry_run: bool) -> list[str]:
    removed = [e for e, _ in report.removed]
    gone = sum(e.size for e in removed)
    left, count = sum(e.size for e in before) - gone, len(before) - len(removed)
    remove_word, keep_word = ("would remove", "would keep") if dry_run else ("removed", "kept")
    lines = []
    if removed:
        lines += _listing(f"{remove_word} {plural(len(removed), 'entry', 'entries')} ({human_size(gone)}):",
                          report.removed, cap, older_than)
    if report.kept:
        one = len(report.kept) == 1
        verb = ("is" if one else "are") if dry_run else ("was" if one else "were")
        lines += _listing(f"{keep_word} {plural(len(report.kept), 'entry', 'entries')} that {verb} due to go:",
                          report.kept, cap, older_than)
    if not removed and not report.kept:
        unused = f", and none unused for {age(older_than)}" if older_than is not None else ""
        lines.append(f"nothing to remove: {human_size(left)} in {plural(count, 'entry', 'entries')}, "
                     f"within the size limit of {human_size(cap)}{unused}")
    else:
        lines.append(f"{'would leave' if dry_run else 'now'} {human_size(left)} in "
                     f"{plural(count, 'entry', 'entries')} (size limit {human_size(cap)})")
    return lines


def _with_reason(items: list[tuple[Any, str]]) -> list[dict[str, Any]]:
    return [dict(e.to_json(), reason=why) for e, why in items]


def run_prune(args: argparse.Namespace) -> int:
    from ..cache.store.admin import PruneReport, entries, prune
    from ..config import parse_duration, parse_size

    settings, cache = open_cache(args, writes=None if args.dry_run else "cache prune")
    cap = parse_size(args.max_size, "--max-size") if args.max_size else settings.cache_max_size
    older = parse_duration(args.older_than, "--older-than") if args.older_than else None
    before = entries(cache)
    note_refused(before)
    report = PruneReport()
    prune(cache, max_size=cap, older_than=older, dry_run=args.dry_run, report=report)
    if args.json:
        gone = sum(e.size for e, _ in report.removed)
        print(dumps({"schema": PRUNE_SCHEMA, "location": str(settings.cache_dir), "dry_run": args.dry_run,
                     "cap": cap, "older_than": older, "removed": _with_reason(report.removed),
                     "kept": _with_reason(report.kept), "removed_size": gone,
                     "size_before": sum(e.size for e in before), "size_after": sum(e.size for e in before) - gone,
                     "entries_after": len(before) - len(report.removed)}))
    else:
        print("\n".join(_prune_text(report, before, cap, older, args.dry_run)))
    return EXIT_OK


def run_clear(args: argparse.Namespace) -> int:
    from ..cache.store.admin import PruneReport, clear, entries

    settings, cache = open_cache(args, writes="cache clear")
    count = len(entries(cache))
    if not args.yes:
        if not sys.stdin.isatty():
            print("jitflow: error: refusing to clear without --yes when not on a terminal", file=sys.stderr)
            return EXIT_USAGE
        answer = input(f"remove all {plural(count, 'entry', 'entries')} in {settings.cache_dir}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return EXIT_OK
    report = PruneReport()
    clear(cache, report=report)
    gone = sum(e.size for e, _ in report.removed)
    print(f"removed {plural(len(report.removed), 'entry', 'entries')} ({human_size(gone)})")
    if report.kept:
        print("\n".join(_listing(f"kept {plural(len(report.kept), 'entry', 'entries')}:", report.kept)))
    return EXIT_OK
