"""jitflow.build_all: the cache misses of many executables built in parallel (autotuning compiles
hundreds), in forked processes on this machine (local.py) or on a Ray cluster (ray_backend.py,
with what travels in request.py and the worker's side in worker.py).

Either way the result is the same library the caller would build, in the caller's disk cache:
exe.jit() afterwards is a hit. One failure never stops the others.
"""
from __future__ import annotations

from typing import Any, Sequence

from .. import config
from ..errors import JitflowError
from . import local
from .progress import SweepProgress
from .result import BuildResult, checked, failed

__all__ = ["BuildResult", "build_all"]


def build_all(executables: Sequence[Any], jobs: int | None = None, backend: str = "local",
              timeout_s: float | None = None, batch: int | None = None) -> list[BuildResult]:
    """Build (or find in the cache) every executable; results in input order.

    backend "local": `jobs` forked processes (default one per CPU). backend "ray": a Ray task per
    library on the cluster this process is connected to (`ray.init(...)`; a local one is started,
    with a warning, if none is), at most `jobs` at once if given; see docs/farm.md.
    timeout_s: seconds each build may take (Executable.build's limit): past them its compiler is
    killed, the item fails with BuildTimeoutError and nothing is stored; None: no limit.
    batch (backend "local"): each process builds up to that many items at once, and compiles their
    host C in one compiler process, each its own object (the libraries are those built one at a
    time; a failure or a timeout is still the item's own); None: JITFLOW_BUILD_BATCH, default 1.
    Afterwards exe.jit() on each loads from the cache. Build errors are returned, not raised; an
    item that is not an Executable, `jobs` below 1, a bad timeout or an unknown backend is an
    InvalidInputError before anything is built.
    """
    items = checked(executables, jobs, backend, timeout_s)
    per_process = config.build_batch(batch)
    results: list[BuildResult | None] = [None] * len(items)
    first: dict[str, int] = {}           # key -> the first item with it (built once)
    for i, exe in enumerate(items):
        try:
            key = exe.key
        except JitflowError as exc:
            results[i] = failed(exe, exc)
            continue
        first.setdefault(key, i)
    where = "on Ray" if backend == "ray" else "here"
    mode = items[0].settings.progress if items else "off"
    progress = SweepProgress(len(first), where, mode)

    def finished(i: int, result: BuildResult) -> None:
        results[i] = result
        progress.done(result)

    try:
        if backend == "ray":
            from . import ray_backend

            ray_backend.build_on_ray(items, list(first.values()), jobs, finished, timeout_s)
        else:
            local.build_here(items, list(first.values()), jobs, finished, timeout_s, per_process)
    finally:
        progress.close()
    for i, exe in enumerate(items):
        if results[i] is None:      # a twin of an earlier item: the same key, the same result
            twin = results[first[exe.key]]
            assert twin is not None
            results[i] = BuildResult(exe, twin.ok, twin.outcome, twin.error, twin.error_type, twin.where, twin.note)
    return [r for r in results if r is not None]
