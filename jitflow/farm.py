"""jitflow.build_all: the cache misses of many executables built in parallel processes (autotuning
compiles hundreds).

Workers are forked, so they inherit the executables as they are (TVM IR objects need no
pickling); each builds with the public Executable.build() into the shared disk cache, under the
usual per-key lock, and reports back plain data. One failure never stops the others.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .errors import InvalidInputError, JitflowError

_WORK: list[Any] = []   # in a worker process only: the executables it inherited from the parent


@dataclass
class BuildResult:
    """The outcome of one executable in build_all: its build_info, or the error that stopped it."""

    executable: Any
    ok: bool
    outcome: str = ""            # "hit", "built", or "" on error
    error: str | None = None
    error_type: str | None = None

    def __repr__(self) -> str:
        state = self.outcome if self.ok else f"{self.error_type}: {(self.error or '').splitlines()[0]}"
        return f"<BuildResult {state}>"


def _adopt(items: list[Any]) -> None:
    """Worker initializer: keep the parent's executables (a forked worker inherits them unpickled)."""
    global _WORK
    _WORK = items


def _build_one(index: int, items: list[Any] | None = None) -> tuple[int, bool, str, str | None, str | None]:
    exe = (items if items is not None else _WORK)[index]
    try:
        return index, True, exe.build().outcome, None, None
    except Exception as exc:  # noqa: BLE001 - reported per item; the parent raises nothing
        return index, False, "", str(exc), type(exc).__name__


def _checked(executables: Any, jobs: Any) -> list[Any]:
    """The executables as a list, after refusing what build_all cannot take (before anything is built)."""
    from .executable import Executable

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidInputError(f"jobs must be a whole number of processes, 1 or more (or None for one per "
                                f"CPU), not {jobs!r}")
    if isinstance(executables, (Executable, str, bytes)) or not isinstance(executables, Iterable):
        raise InvalidInputError(f"build_all takes a list of Executables (from jitflow.compile), "
                                f"not {type(executables).__name__}")
    items = list(executables)
    for i, exe in enumerate(items):
        if not isinstance(exe, Executable):
            raise InvalidInputError(f"build_all: item {i} is a {type(exe).__name__}, not an Executable "
                                    "(make one with jitflow.compile(mod, target))")
    return items


def build_all(executables: Sequence[Any], jobs: int | None = None) -> list[BuildResult]:
    """Build (or find in the cache) every executable, `jobs` at a time; results in input order.

    Afterwards exe.jit() on each loads from the cache. Build errors are returned, not raised; an item
    that is not an Executable, or `jobs` below 1, is an InvalidInputError before anything is built.
    """
    items = _checked(executables, jobs)
    results: list[BuildResult | None] = [None] * len(items)
    todo: dict[str, int] = {}
    for i, exe in enumerate(items):
        try:
            key = exe.key
        except JitflowError as exc:
            results[i] = BuildResult(exe, False, error=str(exc), error_type=type(exc).__name__)
            continue
        todo.setdefault(key, i)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if jobs == 1 or len(todo) <= 1:
        done = [_build_one(i, items) for i in todo.values()]
    else:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_adopt, initargs=(items,)) as pool:
            done = list(pool.map(_build_one, todo.values()))
    by_key = {items[i].key: (ok, outcome, err, etype) for i, ok, outcome, err, etype in done}
    for i, exe in enumerate(items):
        if results[i] is not None:
            continue
        ok, outcome, err, etype = by_key[exe.key]
        results[i] = BuildResult(exe, ok, outcome if ok else "", err, etype)
    return [r for r in results if r is not None]
