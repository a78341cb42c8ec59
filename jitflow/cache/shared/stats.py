"""This machine's shared-tier counters: each process counts, and adds its counts to the cache's
totals when it exits (`jitflow cache info` shows them)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

#: Counter names of stats(): shared entries loaded, lookups without a usable entry (built here),
#: entries refused by their checks, entries sent, entries too large to send, failed requests.
COUNTERS = ("hits", "misses", "refusals", "stored", "too_large", "errors")

#: the machine's totals, in the cache folder
STATS_FILE = "remote_stats.json"

_counts = dict.fromkeys(COUNTERS, 0)
_counts_lock = threading.Lock()
_persist_to: set[str] = set()


def count(name: str, n: int = 1) -> None:
    """Add to one of this process's shared-tier counters (COUNTERS)."""
    with _counts_lock:
        _counts[name] += n


def stats() -> dict[str, int]:
    """This process's shared-tier counters: hits, misses, refusals, stored, too_large, errors."""
    with _counts_lock:
        return dict(_counts)



def persist_at_exit(cache_root: Path) -> None:
    """Add this process's counters to the cache's machine-wide totals when it exits."""
    import atexit

    with _counts_lock:
        if not _persist_to:
            atexit.register(_persist)
        _persist_to.add(str(cache_root))


def _persist() -> None:
    from filelock import FileLock

    counts = stats()
    if not any(counts.values()):
        return
    for root in _persist_to:
        path = Path(root) / STATS_FILE
        try:
            with FileLock(str(path) + ".lock", timeout=2):
                totals = machine_stats(Path(root))
                for name, n in counts.items():
                    totals[name] = totals.get(name, 0) + n
                path.write_text(json.dumps(totals, sort_keys=True))
        except Exception:  # noqa: BLE001 - statistics must never fail a process at exit
            pass


def machine_stats(cache_root: Path) -> dict[str, int]:
    """Shared-tier counters of every process that used this cache (as `jitflow cache info` shows)."""
    try:
        data = json.loads((Path(cache_root) / STATS_FILE).read_text())
        return {k: int(v) for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def reset_stats() -> None:
    """Set this process's counters back to zero."""
    with _counts_lock:
        _counts.update(dict.fromkeys(COUNTERS, 0))


