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


def build_here(items: list[Any], todo: list[int], jobs: int | None,
               finished: Callable[[int, BuildResult], None], timeout_s: float | None = None) -> None:
    """Build items[i] for each i in `todo`, `jobs` at a time (one per CPU by default), each within
    `timeout_s` (Executable.build), calling finished(i, result) as each ends."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if jobs == 1 or len(todo) <= 1:
        for i in todo:
            finished(i, _result(items, _build_one(i, items, timeout_s)))
        return
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_adopt, initargs=(items,)) as pool:
        for future in as_completed([pool.submit(_build_one, i, None, timeout_s) for i in todo]):
            done = future.result()
            finished(done[0], _result(items, done))


def _result(items: list[Any], done: Done) -> BuildResult:
    i, ok, outcome, err, etype = done
    return BuildResult(items[i], ok, outcome if ok else "", err, etype)
