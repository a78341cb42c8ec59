"""The build pipeline, the one place that knows the order of the steps:
key -> cache lookup -> lower -> device -> host -> pack -> link -> store -> load.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import cache_admin, device, lower, pack, remote_tier, zig_cc
from .cache import LIBRARY, Cache
from .errors import CacheError, CompileError
from .progress import Progress
from .config import Settings
from .target import TargetSpec

log = logging.getLogger("jitflow")


@dataclass
class BuildInfo:
    """How a library was obtained and what each stage cost, in seconds."""

    key: str
    outcome: str                       # "hit" (disk cache), "shared" (shared tier), "built", or "memory"
    stages: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    library: Path | None = None

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in self.stages.items())
        return f"{self.outcome} {self.key[:12]} in {self.total * 1000:.1f} ms" + (f" ({parts})" if parts else "")


class _Clock:
    """Times the stages of a build into `stages` and shows them as progress."""

    def __init__(self, stages: dict[str, float], progress: Progress | None = None) -> None:
        self.stages = stages
        self.progress = progress

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        log.debug("jitflow: %s ...", name)
        if self.progress:
            self.progress.set(name)
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - start
            log.info("jitflow: %s took %.0f ms", name, self.stages[name] * 1000)


def _include_dirs() -> list[str]:
    import tvm
    import tvm_ffi.libinfo

    return list(dict.fromkeys([tvm.libinfo.find_include_path(), tvm_ffi.libinfo.find_include_path(),
                               tvm_ffi.libinfo.find_dlpack_include_path()]))


def _compile_devices(lowered: lower.Lowered, src: Path, spec: TargetSpec, settings: Settings,
                     options: dict[str, Any], clock: _Clock) -> dict[int, bytes]:
    """Each device module's CUDA source (kept in src/) -> fatbin, by blob index."""
    stages = clock.stages

    def arch_done(arch: str, seconds: float) -> None:
        stages[f"device {arch}"] = stages.get(f"device {arch}", 0.0) + seconds
        log.info("jitflow: device code for %s took %.0f ms", arch, seconds * 1000)
        if clock.progress:
            clock.progress.finished(arch)

    fatbins: dict[int, bytes] = {}
    if lowered.devices:
        log.debug("jitflow: device ...")
        if clock.progress:
            clock.progress.set(f"device code for {', '.join(spec.archs)}")
    for n, dev in enumerate(lowered.devices):
        cu = src / f"kernels{n or ''}.cu"
        cu.write_text(dev.source)
        fatbin, dlog = device.compile_fatbin(cu, spec.archs, settings.cuda_compiler,
                                             options.get("device_options", ()), arch_done)
        (src / f"{cu.stem}.log").write_text(dlog)
        fatbins[dev.index] = fatbin
    return fatbins


def build_into(folder: Path, mod: Any, spec: TargetSpec, settings: Settings, options: dict[str, Any],
               stages: dict[str, float], progress: Progress | None = None) -> dict[str, Any]:
    """Build the library into folder/lib.so, keeping sources in folder/src; returns metadata."""
    clock = _Clock(stages, progress)
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    with clock.stage("lower"):
        lowered = lower.lower(mod, spec, options.get("pass_config"), options.get("relax_pipeline"))
    host_c = src / "host.c"
    host_c.write_text(lowered.host_c)
    objects = [folder / "host.o"]
    host_start = time.perf_counter()  # zig compiles the host in the background while device code builds
    host_job = zig_cc.compile_object(host_c, objects[0], _include_dirs(), spec.host, settings.zig_cache_dir)
    try:
        fatbins = _compile_devices(lowered, src, spec, settings, options, clock)
    except BaseException:
        host_job.cancel()
        raise
    host_job.wait()
    stages["host"] = time.perf_counter() - host_start
    log.info("jitflow: host took %.0f ms (beside device code)", stages["host"] * 1000)
    if lowered.blob is not None:
        with clock.stage("pack"):
            blob = pack.with_fatbins(lowered.blob, fatbins)
            objects.append(pack.write_blob_asm(blob, folder))
    with clock.stage("link"):
        zig_cc.link_shared(objects, folder / LIBRARY, spec.host, settings.zig_cache_dir)
    for leftover in ["host.o", "blob.bin", "blob.S"]:
        (folder / leftover).unlink(missing_ok=True)
    return {
        "functions": lowered.functions,
        "target": {"kind": spec.kind, "archs": list(spec.archs), "host": spec.host},
        "cuda": bool(lowered.devices),
        "sources": sorted(str(p.relative_to(folder)) for p in src.iterdir()),
    }


def obtain(key: str, inputs: dict[str, Any], mod: Any, spec: TargetSpec, settings: Settings,
           options: dict[str, Any]) -> tuple[Path, dict[str, Any], BuildInfo]:
    """The verified library for `key`: from the cache, or built (once, under the key's lock) and stored."""
    start = time.perf_counter()
    info = BuildInfo(key=key, outcome="hit")
    if not settings.cache_enabled:
        folder = Path(tempfile.mkdtemp(prefix="jitflow-"))
        with _progress(key, spec) as progress:
            meta = build_into(folder, mod, spec, settings, options, info.stages, progress)
        info.outcome, info.total, info.library = "built", time.perf_counter() - start, folder / LIBRARY
        log.info("jitflow: %s (cache disabled)", info)
        return folder / LIBRARY, dict(_with_inputs(meta, inputs), key=key), info
    cache = Cache(settings.cache_dir)
    found = cache.lookup(key, inputs)
    if found is None:
        usable = _usable(cache)
        if usable is not cache:
            cache = usable
            found = cache.lookup(key, inputs)
    if found is None:
        wait_start = time.perf_counter()
        with cache.lock(key), remote_tier.Turn(settings, cache, key) as shared:
            info.stages["wait"] = time.perf_counter() - wait_start
            found = cache.lookup(key, inputs)  # another process may have built it while we waited
            if found is None and shared.configured:
                with _Clock(info.stages).stage("shared tier"):  # a verified entry, or this node's turn to build
                    found = shared.fetch(inputs)
                info.outcome = "shared" if found else info.outcome
            if found is None:
                info.outcome = "built"
                try:
                    with cache.staging(key) as folder, _progress(key, spec) as progress:
                        meta = build_into(folder, mod, spec, settings, options, info.stages, progress)
                        meta = dict(_with_inputs(meta, inputs), stages=dict(info.stages))
                        with _Clock(info.stages, progress).stage("store"):
                            lib = cache.publish(key, folder, meta)
                except (OSError, CompileError) as exc:  # a full disk shows up as either; nothing half-written stays
                    full = _out_of_space(cache.root)
                    if isinstance(exc, CompileError) and not full:
                        raise
                    reason = "no space left on the device" if full else str(exc)
                    raise CacheError(f"cannot write the cache entry under {cache.root}: {reason}; "
                                     "free space, or set JITFLOW_CACHE_DIR elsewhere or JITFLOW_CACHE=0") from None
                found = lib, cache.read_meta(key) or meta
                shared.share()
        if info.outcome in ("built", "shared"):  # after the key's lock is released: others may load it now
            cache_admin.prune(cache, max_size=settings.cache_max_size, keep=key)
    info.total, info.library = time.perf_counter() - start, found[0]
    log.info("jitflow: %s", info)
    return found[0], found[1], info


def _with_inputs(meta: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Build metadata plus what went into the key (checked again on every lookup)."""
    return dict(meta, key_inputs=inputs, versions=inputs["versions"])


_warned_fallback = False


def _out_of_space(folder: Path, margin: int = 1 << 20) -> bool:
    try:
        return shutil.disk_usage(folder).free < margin
    except OSError:
        return False


def _usable(cache: Cache) -> Cache:
    """The configured cache if it can be written; else a per-user temporary one, with one warning."""
    global _warned_fallback
    try:
        cache.ensure()
        return cache
    except CacheError as exc:
        fallback = Cache(Path(tempfile.gettempdir()) / f"jitflow-{os.getuid()}")
        try:
            fallback.ensure()
        except CacheError:
            raise exc from None
        if not _warned_fallback:
            log.warning("jitflow: %s; using %s for this process instead", exc, fallback.root.parent)
            _warned_fallback = True
        return fallback


@contextmanager
def _progress(key: str, spec: TargetSpec) -> Iterator[Progress]:
    progress = Progress(f"{key[:12]} for {spec.describe()}")
    outcome = "failed"
    try:
        yield progress
        outcome = "done"
    finally:
        progress.close(outcome)


def remove_temporary(library: Path) -> None:
    """Remove the temporary build folder of an uncached build once its library is loaded."""
    shutil.rmtree(library.parent, ignore_errors=True)
