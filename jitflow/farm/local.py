"""build_all on this machine: the cache misses built in forked processes.

Workers are forked (workers.py), so they inherit the executables as they are (TVM IR objects need
no pickling); each builds with the public Executable.build() into the shared disk cache, under the
usual per-key lock, and reports back plain data. One failure never stops the others, and neither
does a worker that dies (killed by the OOM killer, a crash of TVM on one candidate): its item fails
with BuildProcessDiedError, saying of what it died; the items of a batch it had not finished are
built again one by one, so that only the one that kills its process fails.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from ..errors import BuildProcessDiedError
from . import workers
from .result import BuildResult

Done = tuple[int, bool, str, "str | None", "str | None"]


def _build_one(index: int, items: list[Any], timeout_s: float | None = None) -> Done:
    exe = items[index]
    try:
        return index, True, exe.build(timeout_s).outcome, None, None
    except Exception as exc:  # noqa: BLE001 - reported per item; the parent raises nothing
        return index, False, "", str(exc), type(exc).__name__


def _build_some(indices: list[int], items: list[Any], timeout_s: float | None = None) -> list[Done]:
    """Build several items together, their host C compiled in shared processes (batch.py)."""
    from .batch import build_batch

    return build_batch(indices, lambda i: _build_one(i, items, timeout_s))


def _build_group(group: list[int], items: list[Any], timeout_s: float | None) -> list[Done]:
    return _build_some(group, items, timeout_s) if len(group) > 1 else [_build_one(group[0], items, timeout_s)]


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
            for done in _build_group(group, items, timeout_s):
                finished(done[0], _result(items, done))
        return

    def work(group: list[int], send: Callable[[Done], None]) -> None:     # in a worker
        for done in _build_group(group, items, timeout_s):
            send(done)

    def died(group: list[int], sent: list[Done], exitcode: int | None) -> list[list[int]]:
        left = [i for i in group if i not in {done[0] for done in sent}]
        if len(group) > 1:            # which one killed it is not known: each again, alone
            return [[i] for i in left]
        for i in left:
            error = BuildProcessDiedError(_described(items[i]), exitcode)
            finished(i, BuildResult(items[i], False, "", str(error), type(error).__name__))
        return []

    workers.run(groups, jobs, work, lambda done: finished(done[0], _result(items, done)), died)


def _described(exe: Any) -> str:
    """An item as an error names it: its label, if it has one, and its key."""
    try:
        key = exe.key[:12]
    except Exception:  # noqa: BLE001 - a key that cannot be taken was reported before the build
        key = "?"
    name = getattr(getattr(exe, "options", None), "name", None)
    return f"{name!r} (key {key})" if name else f"key {key}"


def _result(items: list[Any], done: Done) -> BuildResult:
    i, ok, outcome, err, etype = done
    return BuildResult(items[i], ok, outcome if ok else "", err, etype)
