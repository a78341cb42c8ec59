"""What the cache sub-commands share: the --cache-dir and --json options, opening the cache, the entry table."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .output import human_size, when

ENTRY_HEADER = ["key", "module", "target", "host", "size", "created", "last used", "options"]
SIZE_COLUMN = 4


def cache_dir_option(p: argparse.ArgumentParser, default: Any = None) -> None:
    """--cache-dir, on `cache` (default None) and on each action (default SUPPRESS, so that the
    action's own --cache-dir wins and its absence leaves the one given before the action)."""
    p.add_argument("--cache-dir", default=default, metavar="DIR",
                   help="the cache to work on (default: JITFLOW_CACHE_DIR, else the user cache folder)")


def json_option(p: argparse.ArgumentParser, schema: str) -> None:
    p.add_argument("--json", action="store_true", help=f"JSON instead of text (schema {schema}, docs/cli.md)")


def open_cache(args: argparse.Namespace, check: bool = True, writes: str | None = None) -> tuple[Any, Any]:
    """The settings and the configured Cache the arguments name (cache/store/location.py); with `check`,
    refused as the admin commands refuse it: an InvalidInputError when the folder was named and does
    not exist (a typo, not an empty cache), a CacheError when a file is in the way or when the
    command `writes` (its name: one that changes the cache) meets JITFLOW_CACHE=readonly, an
    UntrustedFolderError (with the reason) when others could change the folder."""
    from ..cache.store import location
    from ..config import resolve

    settings = resolve(cache_dir=args.cache_dir)
    folders = location.open_cache(settings)
    if not check:
        return settings, folders.configured
    cache = folders.for_admin(writes)
    if not named_folder_exists(settings):
        from ..errors import InvalidInputError

        raise InvalidInputError(f"{settings.cache_dir} does not exist: no cache is there (--cache-dir, else "
                                "JITFLOW_CACHE_DIR, names the cache folder; a build creates it)")
    return settings, cache


def named_folder_exists(settings: Any) -> bool:
    """False for a cache folder that was named (--cache-dir, JITFLOW_CACHE_DIR) and does not exist. The
    default folder may not exist yet (nothing built): that is an empty cache."""
    from ..config import default_cache_dir

    folder = settings.cache_dir
    return folder.exists() or folder.is_symlink() or folder == default_cache_dir()


def _options(words: list[str], width: int = 48) -> str:
    text = " ".join(words) or "-"
    return text if len(text) <= width else text[:width - 3] + "..."


def entry_row(e: Any) -> list[str]:
    """One cache entry (admin.EntryInfo) as a row under ENTRY_HEADER: the module is the name it was
    built under (FILE.py:NAME on the command line, compile(name=...)), else its functions, with the
    file and line it was compiled at (`main at serve.py:12`); the target has the CPU level, and the
    options what sets it apart from a default build (shortened)."""
    import os

    from ..cache.store.entry import label

    module = label(e.name, e.functions) if e.readable else "(unreadable)"
    if e.readable and e.origin:
        module += f" at {os.path.basename(e.origin)}"
    return [e.key[:12], module, e.target, e.host,
            human_size(e.size), when(e.created), when(e.last_used), _options(e.options) if e.readable else "?"]


def note_refused(rows: list[Any]) -> None:
    """Say on stderr which entries have metadata that cannot be used (they are listed, never loaded)."""
    for e in rows:
        if e.problem:
            print(f"jitflow: note: entry {e.key[:12]} is refused ({e.problem}): it is rebuilt when next used, "
                  "and prune removes it like any other", file=sys.stderr)
