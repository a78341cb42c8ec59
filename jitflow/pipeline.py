"""The pipeline, the one place that knows the order of things:
key -> disk cache -> shared tier -> build (build/steps.py) -> store -> evict; loading is the caller's.

What it hands back is a LibraryFile: the library held open, verified through that descriptor
(its sha256 against the entry's metadata on a hit, hashed as it is published after a build).
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .builder import pass_context
from .builder.clock import BuildInfo, Clock
from .builder.progress import Progress
from .builder.steps import build_into
from .cache import admin, location
from .cache.disk import Cache
from .cache.entry import LIBRARY
from .cache.failed import keep_sources
from .cache.key import ir_sha256, module_text
from .cache.shared.tier import Turn
from .config import Settings
from .errors import CacheError, CompileError, InvalidInputError
from .runtime.library_file import LibraryFile
from .target import TargetSpec

log = logging.getLogger("jitflow")


def obtain(key: str, inputs: dict[str, Any], mod: Any, spec: TargetSpec, settings: Settings,
           options: dict[str, Any], key_is_fresh: bool = False) -> tuple[LibraryFile, dict[str, Any], BuildInfo]:
    """The verified library for `key`: from the cache, or built (once, under the key's lock) and stored.

    key_is_fresh: the key was taken from `mod` just now, so a build need not take it again to check
    that the module has not changed since (a model's weights take tens of milliseconds to hash).
    """
    start = time.perf_counter()
    pass_context.warn_if_entered_late(options.get("caller_context"))
    info = BuildInfo(key=key, outcome="hit")
    recheck = not key_is_fresh
    if not settings.cache_enabled:
        library, meta = _build_uncached(key, inputs, mod, spec, settings, options, info, recheck)
        info.outcome, info.total, info.library = "built", time.perf_counter() - start, library.path
        log.info("jitflow: %s (cache disabled)", info)
        return library, meta, info
    cache = Cache(settings.cache_dir)
    found = cache.lookup(key, inputs)
    if found is None:
        usable = location.usable(cache)
        if usable is not cache:
            cache = usable
            found = cache.lookup(key, inputs)
    if found is None:
        wait_start = time.perf_counter()
        with cache.lock(key), Turn(settings, cache, key) as shared:
            info.stages["wait"] = time.perf_counter() - wait_start
            found = cache.lookup(key, inputs)  # another process may have built it while we waited
            if found is None and shared.configured:
                with Clock(info.stages).stage("shared tier"):  # a verified entry, or this node's turn to build
                    found = shared.fetch(inputs)
                info.outcome = "shared" if found else info.outcome
            if found is None:
                info.outcome = "built"
                found = _build_and_store(cache, key, inputs, mod, spec, settings, options, info, recheck)
                shared.share()
        if info.outcome in ("built", "shared"):  # after the key's lock is released: others may load it now
            admin.prune(cache, max_size=settings.cache_max_size, keep=key)
    info.total, info.library = time.perf_counter() - start, found[0].path
    log.info("jitflow: %s", info)
    return found[0], found[1], info


def _build_uncached(key: str, inputs: dict[str, Any], mod: Any, spec: TargetSpec, settings: Settings,
                    options: dict[str, Any], info: BuildInfo, recheck: bool) -> tuple[LibraryFile, dict[str, Any]]:
    """Build in a private temporary folder, removed on failure (its sources kept for the error)."""
    folder = Path(tempfile.mkdtemp(prefix="jitflow-"))
    try:
        with _progress(key, spec, settings) as progress:
            meta = _build(folder, mod, inputs, spec, settings, options, info, progress, recheck)
        return LibraryFile.open(folder / LIBRARY), dict(_with_inputs(meta, inputs), key=key)
    except BaseException as exc:
        try:
            if isinstance(exc, CompileError):
                raise keep_sources(location.usable(Cache(settings.cache_dir)).root, key, folder, exc) from None
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _build_and_store(cache: Cache, key: str, inputs: dict[str, Any], mod: Any, spec: TargetSpec, settings: Settings,
                     options: dict[str, Any], info: BuildInfo, recheck: bool) -> tuple[LibraryFile, dict[str, Any]]:
    """Build into a staging folder and publish it; a full disk is a CacheError that leaves nothing."""
    try:
        with cache.staging(key) as folder, _progress(key, spec, settings) as progress:
            try:
                meta = _build(folder, mod, inputs, spec, settings, options, info, progress, recheck)
            except CompileError as exc:
                if _out_of_space(cache.root):
                    raise
                raise keep_sources(cache.root, key, folder, exc) from None
            meta = dict(_with_inputs(meta, inputs), stages=dict(info.stages))
            with Clock(info.stages, progress).stage("store"):
                return cache.publish(key, folder, meta)
    except (OSError, CompileError) as exc:  # a full disk shows up as either; nothing half-written stays
        full = _out_of_space(cache.root)
        if isinstance(exc, CompileError) and not full:
            raise
        reason = "no space left on the device" if full else str(exc)
        raise CacheError(f"cannot write the cache entry under {cache.root}: {reason}; "
                         "free space, or set JITFLOW_CACHE_DIR elsewhere or JITFLOW_CACHE=0") from None


def _build(folder: Path, mod: Any, inputs: dict[str, Any], spec: TargetSpec, settings: Settings,
           options: dict[str, Any], info: BuildInfo, progress: Progress, recheck: bool) -> dict[str, Any]:
    """build_into, after checking (with `recheck`) that the module is still the one the key was taken
    from (a tensor bound in it and changed in place would otherwise be built under the old key)."""
    if recheck and ir_sha256(module_text(mod)) != inputs.get("ir_sha256"):
        raise InvalidInputError("the module changed after its cache key was taken (a tensor bound in it was "
                                "modified in place?); call jitflow.compile() again with the changed module")
    return build_into(folder, mod, spec, settings, options, info.stages, progress)


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
    progress = Progress(f"{key[:12]} for {spec.describe()}", mode=settings.progress)
    outcome = "failed"
    try:
        yield progress
        outcome = "done"
    finally:
        progress.close(outcome)


def remove_temporary(library: LibraryFile | Path) -> None:
    """Remove the temporary build folder of an uncached build once its library is loaded or copied."""
    path = library.path if isinstance(library, LibraryFile) else Path(library)
    shutil.rmtree(path.parent, ignore_errors=True)
