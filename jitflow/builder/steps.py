"""The build steps for one library, in order: lower -> device code -> host code -> pack -> link.

Everything lands in a folder laid out as a cache entry (lib.so, src/); what to do with the
folder (publish it, load it, throw it away) is the pipeline's business.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..cache.entry import Entry
from ..config import Settings
from ..errors import CompileError
from ..target import TargetSpec, cuda_floor
from ..toolchain import cuda, zig
from . import host_c, lower, pack
from .clock import Clock
from .progress import Progress


def _include_dirs() -> list[str]:
    import tvm
    import tvm_ffi.libinfo

    return list(dict.fromkeys([tvm.libinfo.find_include_path(), tvm_ffi.libinfo.find_include_path(),
                               tvm_ffi.libinfo.find_dlpack_include_path()]))


def _compile_devices(lowered: lower.Lowered, entry: Entry, spec: TargetSpec, settings: Settings,
                     options: dict[str, Any], clock: Clock) -> dict[int, bytes]:
    """Each device module's CUDA source (kept in src/) -> fatbin, by blob index."""

    def arch_done(arch: str, seconds: float) -> None:
        clock.add(f"device {arch}", seconds)
        clock.finished(arch)

    fatbins: dict[int, bytes] = {}
    if lowered.devices:
        clock.show(f"device code for {', '.join(spec.archs)}")
    for n, dev in enumerate(lowered.devices):
        cu = entry.kernels_source(n)
        cu.write_text(dev.source)
        floor = cuda_floor.parse(options["cuda_floor"]) if options.get("cuda_floor") else None
        fatbin, dlog = cuda.compile_fatbin(cu, spec.archs, settings.cuda_compiler,
                                           options.get("device_options", ()), arch_done, floor)
        entry.kernels_log(n).write_text(dlog)
        fatbins[dev.index] = fatbin
    return fatbins


def build_into(folder: Path, mod: Any, spec: TargetSpec, settings: Settings, options: dict[str, Any],
               stages: dict[str, float], progress: Progress | None = None) -> dict[str, Any]:
    """Build the library into folder/lib.so, keeping sources in folder/src; returns metadata."""
    clock = Clock(stages, progress)
    entry = Entry(folder)
    entry.sources.mkdir(parents=True, exist_ok=True)
    with clock.stage("lower"):
        lowered = lower.lower(mod, spec, options.get("pass_config"), options.get("relax_pipeline"),
                              options.get("caller_context"))
    entry.host_c.write_text(lowered.host_c)
    objects = [folder / "host.o"]
    host_start = time.perf_counter()  # zig compiles the host in the background while device code builds
    host_job = zig.compile_object(entry.host_c, objects[0], _include_dirs(), spec.host, settings.zig_cache_dir)
    try:
        fatbins = _compile_devices(lowered, entry, spec, settings, options, clock)
    except BaseException:
        host_job.cancel()
        raise
    try:
        host_job.wait()
    except CompileError as exc:
        raise host_c.explain(exc, entry.host_c.read_text()) from None
    clock.add("host", time.perf_counter() - host_start)
    if lowered.blob is not None:
        with clock.stage("pack"):
            blob = pack.with_fatbins(lowered.blob, fatbins)
            objects.append(pack.write_blob_asm(blob, folder))
    with clock.stage("link"):
        zig.link_shared(objects, entry.library, spec.host, settings.zig_cache_dir)
    for leftover in ["host.o", "blob.bin", "blob.S"]:
        (folder / leftover).unlink(missing_ok=True)
    return {
        "functions": lowered.functions,
        "target": {"kind": spec.kind, "archs": list(spec.archs), "host": spec.host},
        "cuda": bool(lowered.devices),
        "sources": entry.source_names(),
    }

