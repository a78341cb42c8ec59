"""Bounded cache: least recently used entries go first, never one in use or just published."""
from __future__ import annotations

import os
import time

import kernels
import pytest
from conftest import READS, start_python

import jitflow
from jitflow.cache.store import admin as cache_admin
from jitflow.cache.store.disk import Cache


def _age(cache_dir, exe, seconds_ago):
    entry = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key
    t = time.time() - seconds_ago
    os.utime(entry / "last_used", (t, t))
    os.utime(entry, (t, t))


def test_cap_evicts_least_recently_used_when_a_build_lands(cache_dir, monkeypatch):
    exes = [jitflow.compile(kernels.axpb(200.0 + i), "c") for i in range(3)]
    for exe in exes:
        exe.jit()
    sizes = [e.size for e in cache_admin.entries(Cache(cache_dir))]
    # used long ago in the order 1, 0, 2 (entry 1 is the least recently used)
    for exe, ago in zip(exes, (3000, 4000, 2000)):
        _age(cache_dir, exe, ago)
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", str(sum(sizes) + min(sizes) // 2))  # room for 3.5 entries
    newest = jitflow.compile(kernels.axpb(299.0), "c")
    newest.jit()
    left = {e.key for e in cache_admin.entries(Cache(cache_dir))}
    assert left == {exes[0].key, exes[2].key, newest.key}


def test_builds_under_the_cap_do_not_walk_the_cache_and_the_cap_still_holds(cache_dir, monkeypatch):
    walks = []
    real_entries = cache_admin.entries
    monkeypatch.setattr(cache_admin, "entries", lambda cache: walks.append(1) or real_entries(cache))
    first = [jitflow.compile(kernels.axpb(230.0 + i), "c") for i in range(3)]
    for exe in first:
        exe.build()
    assert len(walks) == 1                    # the first build walked (the size was unknown), then none
    size = sum(e.size for e in real_entries(Cache(cache_dir)))
    from jitflow.cache.store import counters

    assert counters.read(cache_dir / "v1")["entries_bytes"] == size      # what the builds added up to
    for exe, ago in zip(first, (3000, 4000, 2000)):
        _age(cache_dir, exe, ago)
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", str(size + size // 6))   # room for 3.5 entries
    jitflow.compile(kernels.axpb(239.0), "c").build()
    assert len(walks) == 2                    # over the cap: walked once, and pruned
    left = {e.key for e in real_entries(Cache(cache_dir))}
    assert first[1].key not in left and {first[0].key, first[2].key} <= left
    cache_admin.clear(Cache(cache_dir))       # entries gone: the size is unknown again
    assert counters.read(cache_dir / "v1")["entries_bytes"] is None


def test_entries_in_grace_period_or_being_built_are_kept(cache_dir):
    a, b = (jitflow.compile(kernels.axpb(300.0 + i), "c") for i in range(2))
    a.jit()
    b.jit()
    cache = Cache(cache_dir)
    _age(cache_dir, b, 5000)
    with cache.lock(b.key):     # another process is rebuilding b
        removed = cache_admin.prune(cache, max_size=0)
    assert removed == []        # a was just published, b is locked
    assert {e.key for e in cache_admin.prune(cache, max_size=0)} == {b.key}


def test_stale_staging_folders_are_removed(cache_dir):
    jitflow.compile(kernels.axpb(310.0), "c").jit()
    cache = Cache(cache_dir)
    dead = cache.staging_root / "dead.build"
    dead.mkdir()
    old = time.time() - 2 * cache_admin.STALE_STAGING_SECONDS
    os.utime(dead, (old, old))
    cache_admin.prune(cache)
    assert not dead.exists()


#: rounds of the reader race: a few in `make test`, 20 in `make soak`
PRUNE_ROUNDS = 20 if os.environ.get("JITFLOW_SOAK") else 1


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(PRUNE_ROUNDS))
def test_pruning_while_others_read_never_fails_a_reader(cache_dir, round_):
    """Readers look up and load entries while a pruner evicts them as fast as it can: a reader may
    have to rebuild, never fail (it loads the file it verified, held open, not a path)."""
    scales = [400.0 + 10 * round_ + i for i in range(3)]
    for scale in scales:
        jitflow.compile(kernels.axpb(scale), "c").jit()
    reader = READS + f"""
    failed = [s for r in range(12) for s in {scales!r} if read(s) != 0]
    print("reader ok" if not failed else f"reader failed for {{failed}}")
    """
    procs = [start_python(reader) for _ in range(2)]
    cache = Cache(cache_dir)
    evicted = 0
    deadline = time.monotonic() + 240
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        evicted += len(cache_admin.prune(cache, max_size=0, grace=0))
        time.sleep(0.005)
    for p in procs:
        if p.poll() is None:
            p.kill()
        out, err = p.communicate()
        assert p.returncode == 0 and "reader ok" in out, out + err
    assert evicted > 0  # the pruner really removed entries under the readers
