"""build_all on this machine: the cache misses built in forked processes.

Workers are forked, so they inherit the executables as they are (TVM IR objects need no
pickling); each builds with the public Executable.build() into the shared disk cache, under the
usual per-key lock, and reports back plain data. One failure never stops the others.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable

from .result import BuildResult

_WORK: list[Any] = []   # in a worker process only: the executables it inherited from the parent

Done = tuple[int, bool, str, "str | None", "str | None"]


def _adopt(items: list[Any]) -> None:
    """Worker initializer: keep the parent's executables (a forked worker inherits them unpickled)."""
    global _WORK
    _WORK = items


def _build_one(index: int, items: list[Any] | None = None, timeout_s: float | None = None) -> Done:
    exe = (items if items is not None else _WORK)[index]
    try:
        return index, True, exe.build(timeout_s).outcome, None, None
    except Exception as exc:  # noqa: BLE001 - reported per item; the parent raises nothing
        return index, False, "", str(exc), type(exc).__name__


def _build_some(indices: list[int], items: list[Any] | None = None, timeout_s: float | None = None) -> list[Done]:
    """Build several items together, their host C compiled in shared processes (batch.py)."""
    from .batch import build_batch

    work = items if items is not None else _WORK
    return build_batch(indices, lambda i: _build_one(i, work, timeout_s))


def chunks(todo: list[int], jobs: int, batch: int) -> list[list[int]]:
    """`todo` in batches of at most `batch` items, fewer where that keeps every one of `jobs` busy."""
    size = max(1, min(batch, -(-len(todo) // jobs)))
    return [todo[n:n + size] for n in range(0, len(todo), size)]


def build_here(items: list[Any], todo: list[int], jobs: int | None,
               finished: Callable[[int, BuildResult], None], timeout_s: float | None = None,
               batch: int = 1) -> None:
    """Build items[i] for each i in `todo`, `jobs` at a time (one per CPU by default), each within
    `timeout_s` (Executable.build), calling finished(i, result) as each ends. `batch` above 1: each
    process builds up to that many items at once, their host C compiled by one compiler process."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    groups = chunks(todo, jobs, batch) if batch > 1 else [[i] for i in todo]
    if jobs == 1 or len(todo) <= 1:
        for group in groups:
            for done in (_build_some(group, items, timeout_s) if len(group) > 1
                         else [_build_one(group[0], items, timeout_s)]):
                finished(done[0], _result(items, done))
        return
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_adopt, initargs=(items,)) as pool:
        futures = [pool.submit(_build_some, g, None, timeout_s) if len(g) > 1
                   else pool.submit(_build_one, g[0], None, timeout_s) for g in groups]
        for future in as_completed(futures):
            got = future.result()
            for done in (got if isinstance(got, list) else [got]):
                finished(done[0], _result(items, done))


def _result(items: list[Any], done: Done) -> BuildResult:
    i, ok, outcome, err, etype = done
    return BuildResult(items[i], ok, outcome if ok else "", err, etype)
