"""build_all on a Ray cluster: one task per library, on the cluster this process is connected to.

The caller computes every key; items already in its cache are hits without a task. Each other
item travels as a request (request.py); a Relax model's weights are put in Ray's object store
once per sweep and every task that needs them gets a reference. A task runs worker.run with one
CPU and is retried once if its worker dies (a second death is reported with the item). What a
worker built comes back as an entry whose files are checked against their sha256, and enters the
caller's cache through the cache's door (cache/door.py, install_bytes: checked as a lookup checks,
published under the key's lock, the size cap kept); nothing comes back when the worker shares the
caller's cache folder on the same machine. An item whose inputs cannot travel, or whose worker
computed another key, is built here instead, and its result says why (BuildResult.note). What the
cluster obtained is recorded here (JITFLOW_RECORD), from the results; the workers record nothing.

No setting is sent through Ray: workers read their own (JITFLOW_* on their nodes), so the shared
tier's secret stays where it was put.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ..cache.store import location
from ..cache.store.disk import Cache
from ..errors import CacheError, EntryRefusedError, InvalidInputError, JitflowError, RemoteEntryError, ToolMissingError
from . import request, worker
from .result import BuildResult, failed

log = logging.getLogger("jitflow")
_TASK: Any = None      # worker.run as a Ray remote function, made once per process


def _ray() -> Any:
    """The ray module, connected: to the cluster ray.init() joined, else a local one started now."""
    try:
        import ray
    except ImportError:
        raise ToolMissingError("build_all(backend='ray') needs Ray: pip install 'jitflow[ray]'") from None
    if not ray.is_initialized():
        log.warning("jitflow: build_all(backend='ray'): this process is not connected to a Ray cluster "
                    "(ray.init(address=...)); starting a local one on this machine")
        ray.init(log_to_driver=False)
    return ray


def _task(ray: Any) -> Any:
    global _TASK
    if _TASK is None:
        _TASK = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(worker.run)
    return _TASK


def build_on_ray(items: list[Any], todo: list[int], jobs: int | None,
                 finished: Callable[[int, BuildResult], None], timeout_s: float | None = None) -> None:
    """Build items[i] for each i in `todo` on the cluster (at most `jobs` tasks at once if given),
    each within `timeout_s` on its worker, calling finished(i, result) as each ends."""
    ray = _ray()
    if todo and ray.cluster_resources().get("CPU", 0) < 1:
        raise InvalidInputError("build_all(backend='ray'): the Ray cluster has no CPU to run build tasks on "
                                "(ray.init(num_cpus=0)?); give it at least one, or use backend='local'")
    task = _task(ray)
    refs: dict[str, Any] = {}             # weight sha256 -> its object, put once per sweep
    queued: list[tuple[int, request.Request]] = []
    here: list[tuple[int, str]] = []
    for i in todo:
        exe = items[i]
        try:
            if exe.cached():
                _record(exe, "hit")
                finished(i, BuildResult(exe, True, "hit"))
                continue
            queued.append((i, request.make(exe, str(_cache_of(exe).root), timeout_s)))
        except request.NotPortable as exc:
            here.append((i, f"built here: {exc}"))
        except JitflowError as exc:
            finished(i, failed(exe, exc))
    pending: dict[Any, int] = {}
    limit = jobs or len(queued) or 1

    def submit(i: int, req: request.Request) -> None:
        for digest, data in req.weights.items():
            if digest not in refs:
                refs[digest] = ray.put(data)
        pending[task.remote(req.wire, *[refs[d] for d in req.wire["weights"]])] = i

    queue = iter(queued)
    for i, req in queue:
        submit(i, req)
        if len(pending) >= limit:
            break
    for i, note in here:                      # while the cluster works
        finished(i, _build_here(items[i], note, timeout_s))
    refusals: list[str] = []
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(ready[0])
        finished(i, _collect(ray, ready[0], items[i], refusals, timeout_s))
        for i, req in queue:
            submit(i, req)
            break
    if refusals:
        log.warning("jitflow: %d of %d items were refused by the workers and built here; the first: %s",
                    len(refusals), len(todo), refusals[0])


def _cache_of(exe: Any) -> Cache:
    cache = location.open_cache(exe.settings).for_building()
    if not isinstance(cache, Cache):   # caching is off: request.make refuses such items first
        raise CacheError("caching is off")
    return cache


def _build_here(exe: Any, note: str, timeout_s: float | None = None) -> BuildResult:
    try:
        return BuildResult(exe, True, exe.build(timeout_s).outcome, note=note)
    except Exception as exc:  # noqa: BLE001 - reported per item
        return failed(exe, exc, note=note)


def _collect(ray: Any, ref: Any, exe: Any, refusals: list[str], timeout_s: float | None = None) -> BuildResult:
    """The result of one task: its entry installed here, a refusal built here (and noted in
    `refusals`), or the error."""
    try:
        reply = ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - the worker died twice, or Ray failed the task
        return failed(exe, exc, where="ray", note="the task failed twice (retried once)")
    where = f"ray {reply.get('node', '?')}"
    if not reply["ok"]:
        if reply["refused"]:
            refusals.append(reply["error"])
            return _build_here(exe, f"built here: {reply['error']}", timeout_s)
        return BuildResult(exe, False, error=reply["error"], error_type=reply["error_type"], where=where)
    try:
        _install(exe, reply)
        _record(exe, reply["outcome"])
    except JitflowError as exc:
        return failed(exe, exc, where=where)
    return BuildResult(exe, True, reply["outcome"], where=where)


def _record(exe: Any, outcome: str) -> None:
    """Record a key the cluster obtained for this process (its workers record nothing: request.py)."""
    if exe.settings.record is not None:
        from ..cache.deploy import record

        cache = _cache_of(exe)
        record.obtained(exe.settings.record, exe.key, cache.read_meta(exe.key) or {}, outcome, cache.folder,
                        asked=exe.options.label, origin=exe.options.origin)


def _install(exe: Any, reply: dict[str, Any]) -> None:
    """Put what the worker built into this process's cache through the cache's door (every file's
    sha256, then the checks of a lookup against the key's inputs, then published under the key's
    lock with the size cap kept), or have it check that the entry is there when the worker shared
    this cache (no bytes: checked as a lookup checks, as jit() does)."""
    from ..cache import door

    key = exe.cache_key
    blob = None if reply.get("in_place") else reply["entry"]
    try:
        door.install_bytes(_cache_of(exe), key.digest, blob, expect=key.inputs,
                           max_size=exe.settings.cache_max_size).close()
    except EntryRefusedError as exc:
        because = "" if blob is None else f": {exc}"
        raise RemoteEntryError(f"the entry the worker built for {key.digest[:12]} was refused by this "
                               f"cache{because}") from None
