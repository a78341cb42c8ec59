"""The build pipeline, the one place that knows the order of the steps:
key -> cache lookup -> lower -> device -> host -> pack -> link -> store -> load.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import device, lower, pack, zig_cc
from .cache import LIBRARY, Cache
from .config import Settings
from .target import TargetSpec

log = logging.getLogger("jitflow")


@dataclass
class BuildInfo:
    """How a library was obtained and what each stage cost, in seconds."""

    key: str
    outcome: str                       # "hit" (disk cache), "built", or "memory" (this process)
    stages: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    library: Path | None = None

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in self.stages.items())
        return f"{self.outcome} {self.key[:12]} in {self.total * 1000:.1f} ms" + (f" ({parts})" if parts else "")


class _Clock:
    def __init__(self, stages: dict[str, float]) -> None:
        self.stages = stages

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        log.debug("jitflow: %s ...", name)
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


def build_into(folder: Path, mod: Any, spec: TargetSpec, settings: Settings, options: dict[str, Any],
               stages: dict[str, float]) -> dict[str, Any]:
    """Build the library into folder/lib.so, keeping sources in folder/src; returns metadata."""
    clock = _Clock(stages)
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    with clock.stage("lower"):
        lowered = lower.lower(mod, spec, options.get("pass_config"))
    host_c = src / "host.c"
    host_c.write_text(lowered.host_c)
    fatbins: dict[int, bytes] = {}
    for n, dev in enumerate(lowered.devices):
        cu = src / f"kernels{n or ''}.cu"
        cu.write_text(dev.source)

        def arch_done(arch: str, seconds: float) -> None:
            stages[f"device {arch}"] = stages.get(f"device {arch}", 0.0) + seconds
            log.info("jitflow: device code for %s took %.0f ms", arch, seconds * 1000)

        fatbin, dlog = device.compile_fatbin(cu, spec.archs, settings.cuda_compiler,
                                             options.get("device_options", ()), arch_done)
        (src / f"{cu.stem}.log").write_text(dlog)
        fatbins[dev.index] = fatbin
    objects = [folder / "host.o"]
    with clock.stage("host"):
        zig_cc.compile_object(host_c, objects[0], _include_dirs(), spec.host, settings.zig_cache_dir)
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
        meta = build_into(folder, mod, spec, settings, options, info.stages)
        info.outcome, info.total, info.library = "built", time.perf_counter() - start, folder / LIBRARY
        log.info("jitflow: %s (cache disabled)", info)
        return folder / LIBRARY, dict(meta, key=key, key_inputs=inputs, versions=inputs["versions"]), info
    cache = Cache(settings.cache_dir)
    found = cache.lookup(key)
    if found is None:
        cache.ensure()
        with cache.lock(key):
            found = cache.lookup(key)  # another process may have built it while we waited
            if found is None:
                info.outcome = "built"
                with cache.staging(key) as folder:
                    meta = build_into(folder, mod, spec, settings, options, info.stages)
                    meta = dict(meta, stages=dict(info.stages), key_inputs=inputs, versions=inputs["versions"])
                    with _Clock(info.stages).stage("store"):
                        lib = cache.publish(key, folder, meta)
                found = lib, cache.read_meta(key) or meta
    info.total, info.library = time.perf_counter() - start, found[0]
    log.info("jitflow: %s", info)
    return found[0], found[1], info


def remove_temporary(library: Path) -> None:
    """Remove the temporary build folder of an uncached build once its library is loaded."""
    shutil.rmtree(library.parent, ignore_errors=True)
