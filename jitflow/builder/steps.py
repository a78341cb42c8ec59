"""The build steps for one library, in order: lower -> device code -> host code -> pack -> link.

Everything lands in a folder laid out as a cache entry (lib.so, src/); what to do with the
folder (publish it, load it, throw it away) is the pipeline's business.
"""
from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cache.store.entry import Entry
from ..config import Settings
from ..errors import BuildTimeoutError, CompileError
from ..formats import elf_object
from ..options import BuildOptions, InProcess, relax_pipeline
from ..runtime import compat, ffi_abi
from ..targets import TargetSpec, cpu_level
from ..toolchain.cuda import cuda_flags, device_compiler
from ..toolchain.zig_cc import link, zig, zig_cache
from ..toolchain.deadline import Deadline
from . import lower, memory_facts, pack
from .clock import Clock
from .device_compile import compile_device
from .host_c import source as host_source
from .host_c.compile import HostCompile
from .pack import DevicePiece
from .progress import Progress


def _include_dirs() -> list[str]:
    return list(_found_include_dirs())


@lru_cache(maxsize=1)
def _found_include_dirs() -> tuple[str, ...]:
    """TVM's and tvm-ffi's include folders (looked up once per process: they do not move)."""
    import tvm
    import tvm_ffi.libinfo

    return tuple(dict.fromkeys([tvm.libinfo.find_include_path(), tvm_ffi.libinfo.find_include_path(),
                                tvm_ffi.libinfo.find_dlpack_include_path()]))


def _compile_devices(lowered: lower.Lowered, entry: Entry, spec: TargetSpec, settings: Settings,
                     options: BuildOptions, clock: Clock) -> dict[int, list[DevicePiece]]:
    """Each device module's CUDA source (kept in src/) -> fatbins, by blob index."""

    def arch_done(arch: str, seconds: float) -> None:
        clock.add(f"device {arch}", seconds)
        clock.finished(arch)

    fatbins: dict[int, list[DevicePiece]] = {}
    if lowered.devices:
        clock.show(f"compiling device code for {', '.join(spec.archs)}")
    for n, dev in enumerate(lowered.devices):
        cu = entry.kernels_source(n)
        cu.write_text(dev.source)
        pieces, dlog = compile_device(cu, spec.archs, settings.cuda_compiler, options.device_options,
                                      arch_done, settings.build_jobs, options.cuda_floor,
                                      cuda_flags.for_build(settings.tvm_cuda, settings.cuda_compiler))
        entry.kernels_log(n).write_text(dlog)
        fatbins[dev.index] = pieces
    return fatbins


def _device_code(fatbins: dict[int, list[DevicePiece]]) -> dict[str, Any] | None:
    """What the library's fatbins carry, for its digest record: a load checks it against the GPU
    without importing the fatbin readers or reading the blob."""
    data = [p.fatbin for pieces in fatbins.values() for p in pieces]
    return compat.device_code_of_fatbins(data).to_record() if data else None


def _prepare(folder: Path, spec: TargetSpec, settings: Settings,
             options: BuildOptions) -> tuple[Entry, Path, Path]:
    """Check the archs, make the entry's folders and start what zig needs while TVM lowers (in the
    background: the commands zig runs, asked for once per machine, and the stub C libraries).
    Returns the entry, zig's cache folder and this build's own zig folder."""
    if spec.is_cuda:   # before anything is built: an arch the compiler does not build is an input error
        device_compiler.check_archs(spec.archs, settings.cuda_compiler)
    entry = Entry(folder)
    entry.sources.mkdir(parents=True, exist_ok=True)
    zig_dir = zig_cache.folder(settings.zig_cache_dir)
    side = ThreadPoolExecutor(2, thread_name_prefix="jitflow-prepare")
    side.submit(zig.prepare_compile, spec.host, _include_dirs(), zig_dir,
                options.cpu_level.zig_cpu if options.cpu_level else None)
    side.submit(link.prepare, spec.host, zig_dir)
    side.shutdown(wait=False)
    return entry, zig_dir, folder / "zig-local"     # zig's objects for this build only: removed with it


def build_into(folder: Path, mod: Any, spec: TargetSpec, settings: Settings, options: BuildOptions,
               in_process: InProcess, stages: dict[str, float], progress: Progress | None = None,
               deadline: Deadline | None = None) -> dict[str, Any]:
    """Build the library into folder/lib.so, keeping sources in folder/src; returns metadata.

    `options` are read, never changed; `in_process` holds the caller's PassContext and Relax Pass.
    `deadline`: past it the compiler running is killed (steps in this process, lowering and NVRTC,
    are checked when they end) and BuildTimeoutError is raised.

    Each step's time goes to `stages`; the host C's compile runs beside the device code and packing,
    so its stage is what it adds to theirs: the stages add up to the time spent here."""
    clock = Clock(stages, progress)
    with clock.stage("prepare", "preparing"):
        entry, zig_dir, local = _prepare(folder, spec, settings, options)
    with clock.stage("lower", "lowering with TVM"):
        lowered = lower.lower(mod, spec, options.pass_config, relax_pipeline(options, in_process),
                              in_process.pass_context, defer_pack=True)
    if deadline is not None:
        deadline.check("lowering with TVM")
    entry.host_c.write_text(lowered.host_c)
    host_start = time.perf_counter()  # zig compiles the host in the background while device code builds
    beside = sum(stages.values())     # the stages timed meanwhile are not the host's
    host = HostCompile(entry.host_c, lowered.host_c, folder, _include_dirs(), spec.host, zig_dir, local,
                       None if lowered.devices else clock.show,   # the device code has the line first
                       settings.build_jobs, cpu=options.cpu_level.zig_cpu if options.cpu_level else None,
                       share_entries=not spec.is_cuda and not lowered.is_vm, deadline=deadline)
    try:
        if lowered.pending:
            with clock.stage("pack", "packing the model"):      # a VM's weights, while the host C compiles
                lowered.finish()
        fatbins = _compile_devices(lowered, entry, spec, settings, options, clock)
        if deadline is not None and fatbins:
            deadline.check("compiling device code")
        host.started()      # the split holds the interpreter: the compilers start before the record
        with clock.stage("memory", "keeping the memory record"):
            data = memory_facts.keep(lowered.ir, lowered.blob, folder, spec.kind, spec.host)
        if lowered.blob is not None:
            with clock.stage("pack", "packing the library blob"):
                blob = pack.with_fatbins(lowered.blob, fatbins) if fatbins else lowered.blob_pieces()
                data.append(elf_object.write(blob, folder / "blob.o", spec.host))
        host.on_progress = clock.show
        clock.show(host.describe())
        try:
            objects = host.wait()
        except BuildTimeoutError:
            raise
        except CompileError as exc:
            raise host_source.explain(exc, entry.host_c.read_text()) from None
    except BaseException:
        host.cancel()
        raise
    clock.add("host", max(0.0, time.perf_counter() - host_start - (sum(stages.values()) - beside)))
    with clock.stage("link", "linking"):
        link.link_shared(objects, entry.library, spec.host, zig_dir, local, clock.show, data,
                         needs=lowered.runtime_needs(), cpu=cpu_level.record(options.cpu_level, spec.host),
                         device_code=_device_code(fatbins), deadline=deadline, tvm_ffi=ffi_abi.installed())
    for leftover in [*objects, *data]:
        leftover.unlink(missing_ok=True)
    shutil.rmtree(local, ignore_errors=True)
    named = {"name": options.label} if options.label else {}     # what `cache ls` calls the entry
    if options.origin:
        named["origin"] = options.origin                          # and where it was compiled
    return {
        **named,
        "functions": lowered.functions,
        "target": {"kind": spec.kind, "archs": list(spec.archs), "host": spec.host},
        "cuda": bool(lowered.devices),
        "sources": entry.source_names(),
    }
