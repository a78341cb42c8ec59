"""The pipeline, the one place that knows the order of things:
key -> disk cache -> shared tier -> build (builder/steps.py) -> store -> evict -> record; loading is the
caller's. A read-only cache (JITFLOW_CACHE=readonly) stops after the shared tier: the rest of a
miss is a CacheMissError (cache/readonly.py), and nothing is counted, touched or written under the
cache folder. What was obtained is appended to the record when one is asked for (cache/deploy/record.py).

A hit needs only the lookup: the builder, the shared tier (only where JITFLOW_REMOTE_CACHE is set)
and the cache's admin (the size cap, after a publish) are imported where they are first used.

What it hands back is an Obtained: the library held open, verified through that descriptor (its
sha256 against the entry's metadata on a hit, hashed as it is published after a build), with
its metadata; closing it hands the library back to the cache it came from.
"""
from __future__ import annotations

import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .cache.store import counters, location
from .cache.store.disk import Cache
from .cache.store.entry import LIBRARY
from .cache.key.key import CacheKey, module_unchanged
from .cache.store.location import NullCache
from .config import Settings
from .errors import CacheError, CompileError, InvalidInputError, JitflowError
from .inputs import pass_context
from .options import BuildOptions, InProcess
from .runtime.library_file import LibraryFile
from .targets import TargetSpec

if TYPE_CHECKING:
    from .builder.progress import Progress
    from .toolchain.deadline import Deadline

log = logging.getLogger("jitflow")


@dataclass
class BuildInfo:
    """How a library was obtained and what each stage cost, in seconds (exe.build_info).

    A build's stages add up to its total (to a few milliseconds of bookkeeping): taking the key (when
    it was taken for this build), the lookup, the wait for the key's lock, importing the builder (once
    per process), the steps (builder/steps.py), storing and the size cap's eviction. Device archs that
    compile side by side each count their own time, so with several their sum can pass the total.
    """

    key: str
    outcome: str                       # "hit" (disk cache), "shared" (shared tier), "built", or "memory"
                                       # (cache/deploy/record.py's OUTCOMES)
    stages: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    library: Path | None = None
    note: str | None = None            # what the build's CPU level costs here (a baseline build with vectors)
    cpu_level: str | None = None       # the host code's CPU level ("x86-64-v3"); None: the baseline

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in self.stages.items())
        return f"{self.outcome} {self.key[:12]} in {self.total * 1000:.1f} ms" + (f" ({parts})" if parts else "") \
            + (f" at CPU level {self.cpu_level}" if self.cpu_level else "") \
            + (f"; note: {self.note}" if self.note else "")


@dataclass
class Obtained:
    """A verified library held open, its metadata, how it was obtained, and the cache it came from.

    Close it when done with the library (or use it as a `with` block): that closes the file and,
    for a build with caching off, removes its temporary folder (NullCache.release).
    """

    library: LibraryFile
    meta: dict[str, Any]
    info: BuildInfo
    owner: Any                         # Cache, NullCache, or a read-only miss's TransientCache

    @property
    def path(self) -> Path:
        """Where the library is (the same as `library.path`); read it through `library.fd`, which
        is the file that was verified."""
        return self.library.path

    def close(self) -> None:
        self.owner.release(self.library)

    def __enter__(self) -> Obtained:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def obtain(cache_key: CacheKey, mod: Any, spec: TargetSpec, settings: Settings, options: BuildOptions,
           in_process: InProcess, key_is_fresh: bool = False, deadline: Deadline | None = None,
           key_seconds: float = 0.0) -> Obtained:
    """The verified library for `cache_key`: from the cache, or built (once, under the key's lock) and stored.

    deadline: a build still running then is stopped (its compiler killed) with BuildTimeoutError, and
    nothing is stored.

    key_is_fresh: the key was taken from `mod` just now, so a build need not take it again to check
    that the module has not changed since (a model's weights take tens of milliseconds to hash).
    key_seconds: what taking the key just now cost; a build counts it (stage "key") in its total.
    """
    start = time.perf_counter()
    pass_context.warn_if_entered_late(in_process.pass_context)
    key, inputs = cache_key.digest, cache_key.inputs
    info = BuildInfo(key=key, outcome="hit",
                     cpu_level=options.cpu_level.describe() if options.cpu_level is not None else None)
    recheck = not key_is_fresh
    folders = location.open_cache(settings)
    found, cache = None, None
    if cache_key.uncacheable:
        _say_uncacheable(cache_key.uncacheable)
    for cache in () if cache_key.uncacheable else folders.search():   # the configured cache, then the fallback
        found = cache.lookup(key, inputs)
        if found is not None:
            break
    looked = time.perf_counter() - start
    if found is None and settings.cache_readonly:      # never built: the shared tier's entry, or an error
        from .cache import readonly

        shared = readonly.from_shared(settings, cache_key) if not cache_key.uncacheable else None
        if shared is None:
            raise readonly.miss(folders.configured, cache_key, mod, spec, settings, options)
        (found, cache), info.outcome = shared, "shared"
    elif found is None:
        cache = NullCache(folders) if cache_key.uncacheable else folders.for_building()
        if isinstance(cache, NullCache):
            found = _build_uncached(cache, cache_key, mod, spec, settings, options, in_process, info, recheck,
                                    deadline)
            info.outcome = "built"
        else:
            found = _build_once(cache, cache_key, mod, spec, settings, options, in_process, info, recheck,
                                deadline)
    info.total, info.library = time.perf_counter() - start, found[0].path
    if info.outcome != "hit":    # what the build cost in all: the key and the lookup before it
        first = {"key": key_seconds} if key_seconds else {}
        info.stages = {**first, "lookup": looked + info.stages.pop("lookup", 0.0), **info.stages}
        info.total += key_seconds
    if isinstance(cache, Cache) and not settings.cache_readonly:
        counters.record(cache.root, info.outcome, info.total, found[1])
    log.info("jitflow: %s%s", info, " (cache disabled)" if isinstance(cache, NullCache) else "")
    got = Obtained(found[0], found[1], info, cache)
    if settings.record is not None:
        with _closed_on_error(got):
            _record(settings, got, options)
    return got


def _record(settings: Settings, got: Obtained, options: BuildOptions) -> None:
    """Append what was obtained to the record (cache/deploy/record.py), with the label and origin this
    process gave it; a build that is not cached is not."""
    from .cache.deploy import record

    asked = {"asked": options.label, "origin": options.origin}
    if isinstance(got.owner, Cache):
        record.obtained(settings.record, got.info.key, got.meta, got.info.outcome, got.owner.folder, **asked)
    elif settings.cache_readonly:      # the shared tier's, in a read-only process: the configured cache's key
        record.obtained(settings.record, got.info.key, got.meta, got.info.outcome, settings.cache_dir, **asked)
    else:
        record.not_cached(settings.record, got.info.key, "caching is off" if settings.cache_enabled is False
                          else "this module cannot be cached")


@contextmanager
def _closed_on_error(got: Obtained) -> Iterator[None]:
    try:
        yield
    except BaseException:
        got.close()
        raise


def _say_uncacheable(reason: str) -> None:
    from .logs import warn_once

    warn_once(f"uncacheable {reason}", "jitflow: this build is not cached: %s, so a library in the cache could "
              "be one a process with other code or values built. Fix: capture plain values (numbers, strings, "
              "functions of them, defined in a file) instead, or give cache_salt= (or JITFLOW_CACHE_SALT) naming "
              "what it holds", reason)


def _build_once(cache: Cache, cache_key: CacheKey, mod: Any, spec: TargetSpec, settings: Settings,
                options: BuildOptions, in_process: InProcess, info: BuildInfo,
                recheck: bool, deadline: Deadline | None = None) -> tuple[LibraryFile, dict[str, Any]]:
    """Under the key's lock: another process's result, the shared tier's, or this process's build."""
    key, inputs = cache_key.digest, cache_key.inputs
    wait_start = time.perf_counter()
    with cache.lock(key), _shared_turn(settings, cache, key) as shared:
        info.stages["wait"] = time.perf_counter() - wait_start
        looked = time.perf_counter()
        found = cache.lookup(key, inputs)  # another process may have built it while we waited
        info.stages["lookup"] = time.perf_counter() - looked
        if found is None and shared.configured:
            from .builder.clock import Clock

            with Clock(info.stages).stage("shared tier"):  # a verified entry, or this node's turn to build
                found = shared.fetch(inputs)
            info.outcome = "shared" if found else info.outcome
        if found is None:
            info.outcome = "built"
            found = _build_and_store(cache, cache_key, mod, spec, settings, options, in_process, info, recheck,
                                     deadline)
            shared.share()
    if info.outcome in ("built", "shared"):  # after the key's lock is released: others may load it now
        evict_start = time.perf_counter()
        from .cache.store import admin

        admin.after_publish(cache, key, settings.cache_max_size)
        info.stages["evict"] = time.perf_counter() - evict_start
    return found


def _build_uncached(cache: NullCache, cache_key: CacheKey, mod: Any, spec: TargetSpec, settings: Settings,
                    options: BuildOptions, in_process: InProcess, info: BuildInfo,
                    recheck: bool, deadline: Deadline | None = None) -> tuple[LibraryFile, dict[str, Any]]:
    """Build in the null cache's temporary folder (removed on failure, its sources kept for the error)."""
    key, inputs = cache_key.digest, cache_key.inputs
    begun = time.perf_counter()
    with cache.build_folder() as folder:
        try:
            with _progress(key, spec, settings) as progress:
                info.stages["prepare"] = time.perf_counter() - begun
                meta = _build(folder, mod, cache_key, spec, settings, options, in_process, info, progress, recheck,
                              deadline)
                closing = time.perf_counter()
        except CompileError as exc:
            from .cache.store.failed import keep_sources

            raise keep_sources(cache.sources_root(), key, folder, exc) from None
        found = LibraryFile.open(folder / LIBRARY), dict(_with_inputs(meta, inputs), key=key)
    info.stages["open"] = time.perf_counter() - closing    # the progress line closed, the library opened
    return found


def _build_and_store(cache: Cache, cache_key: CacheKey, mod: Any, spec: TargetSpec, settings: Settings,
                     options: BuildOptions, in_process: InProcess, info: BuildInfo,
                     recheck: bool, deadline: Deadline | None = None) -> tuple[LibraryFile, dict[str, Any]]:
    """Build into a staging folder and publish it; a full disk is a CacheError that leaves nothing."""
    begun = time.perf_counter()
    from .builder.clock import Clock
    from .cache.store.failed import keep_sources

    key, inputs = cache_key.digest, cache_key.inputs
    try:
        with cache.staging(key) as folder, _progress(key, spec, settings) as progress:
            info.stages["prepare"] = time.perf_counter() - begun    # the staging folder, the progress line
            try:
                meta = _build(folder, mod, cache_key, spec, settings, options, in_process, info, progress, recheck,
                              deadline)
            except CompileError as exc:
                if _out_of_space(cache.root):
                    raise
                raise keep_sources(cache.root, key, folder, exc) from None
            meta = dict(_with_inputs(meta, inputs), stages=dict(info.stages))
            with Clock(info.stages, progress).stage("store"):
                published = cache.publish(key, folder, meta)
            closing = time.perf_counter()
        info.stages["store"] += time.perf_counter() - closing    # the staging folder and progress line closed
        return published
    except (OSError, CompileError) as exc:  # a full disk shows up as either; nothing half-written stays
        full = _out_of_space(cache.root)
        if isinstance(exc, CompileError) and not full:
            raise
        reason = "no space left on the device" if full else str(exc)
        raise CacheError(f"cannot write the cache entry under {cache.root}: {reason}; "
                         "free space, or set JITFLOW_CACHE_DIR elsewhere or JITFLOW_CACHE=0") from None


def _build(folder: Path, mod: Any, cache_key: CacheKey, spec: TargetSpec, settings: Settings, options: BuildOptions,
           in_process: InProcess, info: BuildInfo, progress: Progress, recheck: bool,
           deadline: Deadline | None = None) -> dict[str, Any]:
    """build_into, after checking (with `recheck`) that the module is still the one the key was taken
    from (a tensor bound in it and changed in place would otherwise be built under the old key)."""
    begun = time.perf_counter()
    if recheck and not module_unchanged(cache_key, mod):
        raise InvalidInputError("the module changed after its cache key was taken (a tensor bound in it was "
                                "modified in place?); call jitflow.compile() again with the changed module")
    if recheck:
        info.stages["key check"] = time.perf_counter() - begun
    begun = time.perf_counter()
    from .builder.steps import build_into

    imported = time.perf_counter() - begun    # the builder and the compilers' modules: once a process
    if imported >= 0.001:
        info.stages["import"] = imported

    meta = build_into(folder, mod, spec, settings, options, in_process, info.stages, progress, deadline)
    begun = time.perf_counter()
    info.note = _level_note(folder, spec, options)
    noted = time.perf_counter() - begun    # the host C read for vector code, this CPU's features
    if noted >= 0.001:
        info.stages["cpu note"] = noted
    return meta


def _level_note(folder: Path, spec: TargetSpec, options: BuildOptions) -> str | None:
    """For a build at the baseline for this machine whose host C has vector code or math: what the
    baseline costs on this CPU (targets/cpu_level.speed_note), else None."""
    from .builder.host_c.prelude import uses_vectors
    from .runtime import cpu_features
    from .targets import cpu_level, machine_host

    if options.cpu_level is not None or spec.host != machine_host() or spec.host not in cpu_level.LEVELS:
        return None
    try:
        with open(folder / "src" / "host.c", encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 20)
        if not uses_vectors(head):
            return None
        return cpu_level.speed_note(spec.host, cpu_features.this_cpu().features)
    except (OSError, JitflowError):
        return None


class _LocalOnly:
    """The shared tier's part in a build where none is configured (its code is then never imported)."""

    configured = False

    def __enter__(self) -> _LocalOnly:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def share(self) -> None:
        pass


def _shared_turn(settings: Settings, cache: Cache, key: str) -> Any:
    """This process's turn in the shared tier for `key` (cache/shared/tier.py), or _LocalOnly."""
    if not settings.remote.url:
        return _LocalOnly()
    from .cache.shared.tier import Turn

    return Turn(settings, cache, key)


def _with_inputs(meta: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Build metadata plus what went into the key (checked again on every lookup)."""
    return dict(meta, key_inputs=inputs, versions=inputs["versions"])


def _out_of_space(folder: Path, margin: int = 1 << 20) -> bool:
    try:
        return shutil.disk_usage(folder).free < margin
    except OSError:
        return False


@contextmanager
def _progress(key: str, spec: TargetSpec, settings: Settings) -> Iterator[Progress]:
    from .builder.progress import Progress

    progress = Progress(f"{key[:12]} for {spec.describe()}", mode=settings.progress)
    outcome = "failed"
    try:
        yield progress
        outcome = "done"
    finally:
        progress.close(outcome)
