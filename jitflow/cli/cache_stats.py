"""`jitflow cache stats`: how the cache was used, by every process since the counters were zeroed."""
from __future__ import annotations

import argparse
from typing import Any

from .cache_common import json_option, open_cache
from .exit_codes import EXIT_OK
from ..text.format import durations
from .output import dumps, when

STATS_SCHEMA = "jitflow.cache-stats/1"


def register(csub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    st = csub.add_parser("stats", help="hits, misses, shared-tier hits, builds, build time saved",
                         description="What every process that used this cache counted: hits, misses, "
                                     "shared-tier hits, builds, the time builds took and hits saved.")
    st.add_argument("--zero", action="store_true", help="set the counters back to zero")
    json_option(st, STATS_SCHEMA)
    st.set_defaults(func=run_stats)
    return [st]


def stats_data(settings: Any, cache: Any) -> dict[str, Any]:
    """What `cache stats` reports, in its JSON shape (jitflow.cache-stats/1)."""
    from ..cache.store import counters

    totals = counters.read(cache.root)
    totals.pop("entries_bytes")         # the size cap's bookkeeping: `cache info` has the real size
    lookups = totals["hits"] + totals["misses"]
    return {"schema": STATS_SCHEMA, "location": str(settings.cache_dir), **totals,
            "hit_rate": totals["hits"] / lookups if lookups else None}


def run_stats(args: argparse.Namespace) -> int:
    from ..cache.store import counters

    settings, cache = open_cache(args, writes="cache stats --zero" if args.zero else None)
    if args.zero:
        cache.ensure()
        counters.zero(cache.root)
    d = stats_data(settings, cache)
    if args.json:
        print(dumps(d))
        return EXIT_OK
    rate = "-" if d["hit_rate"] is None else f"{100 * d['hit_rate']:.1f} %"
    built, saved = durations(d["build_seconds"], d["saved_seconds"])     # at one precision
    lines = [("location", d["location"]), ("since", when(d["since"]) if d["since"] else "-"),
             ("hits", f"{d['hits']} ({rate} of lookups)"), ("misses", str(d["misses"])),
             ("shared-tier hits", str(d["shared_hits"])), ("builds", str(d["builds"])),
             ("build time", built), ("build time saved", saved)]
    width = max(len(name) for name, _ in lines) + 2
    print("\n".join(f"{name + ':':<{width}}{value}" for name, value in lines))
    return EXIT_OK
