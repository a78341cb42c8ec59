"""Gather a Report from a build: its cache entry (library, metadata, kept sources) or a bare library.

With the sources (a fresh build, a cache hit, a cache entry) the report has the host C, the CUDA
source, every launch and allocation the host code makes, and ptxas' figures; from a library alone
it has what the binary holds (kernels, fatbin entries and sizes, registers, launch parameter tags,
host symbols, CPU and glibc) and says what it cannot know.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..cache.store.entry import Entry, library_problem, sha256_file, target_of
from ..errors import InvalidInputError, LibraryFormatError
from ..formats import c_expr, elf, memory_facts
from ..runtime import library_check
from . import device_modules, host_code, memory_plan_gather
from .device_modules import unreadable
from .report import Report
from .types import LibraryFacts

_NO_HOST = ("launch dimensions, device allocations and copies: decided by the host code compiled into the "
            "library; inspect the module (FILE.py:NAME) or its cache entry to see them")
_NO_LOG = "spills and static shared memory: ptxas reports them at build time (a cache entry keeps that log)"
_NO_CUDA = "CUDA source: not embedded (the fatbin holds SASS and PTX only)"
_NO_HOST_MODEL = ("Relax VM without its host C: sizes computed by shape functions, the TIR functions' "
                  "workspaces and the kernel launches of each call; inspect the module or its cache entry")


def _library_facts(library: Path, path: str | None, notes: list[str]) -> LibraryFacts:
    try:
        facts = elf.read(library)
    except LibraryFormatError as exc:
        unreadable(notes, "the ELF tables (CPU, glibc baseline, exports)", exc)
        facts = elf.ElfInfo("unknown", 64, None)
    level, needs = library_check.recorded_cpu(library)
    return LibraryFacts(path, library.stat().st_size, sha256_file(library), facts.machine, facts.glibc_baseline,
                        tuple(facts.exported), level, needs)


def _recorded_tvm_cuda(meta: dict[str, Any]) -> dict[str, Any]:
    """The TVM_CUDA_* settings a build's key recorded (they shape its device code)."""
    found = (((meta.get("key_inputs") or {}).get("options")) or {}).get("environment")
    return {k: v for k, v in found.items() if str(k).startswith("TVM_CUDA_")} if isinstance(found, dict) else {}


def _with_peaks(host: host_code.HostCode, facts: memory_facts.MemoryFacts | None, kind: str | None) -> None:
    """Workspace sizes from the build's IR (where it recorded them) and each host function's peak
    on the target's device."""
    host.allocations = memory_plan_gather.with_ir_sizes(host.allocations, facts)
    peaks = memory_plan_gather.host_peaks(host.functions, host.allocations, facts)
    device = "cuda" if kind == "cuda" else "cpu"
    host.functions = [replace(f, peak=peaks[f.name].get(device, c_expr.constant(0))) for f in host.functions]


def _floor_of(meta: dict[str, Any]) -> str | None:
    return ((meta.get("key_inputs") or {}).get("options") or {}).get("cuda_floor")


def inspect_folder(folder: Path, meta: dict[str, Any], origin: str, build: str | None = None,
                   keep_paths: bool = True) -> Report:
    """Report on a build folder (lib.so, src/): a cache entry, or a fresh uncached build."""
    entry = Entry(folder)
    library = entry.library
    unknown: list[str] = []
    notes: list[str] = []
    devices = device_modules.devices(library, notes)
    kept = device_modules.kept_sources(entry)
    for n, dev in enumerate(devices):
        source, dev.log = device_modules.kept_for(dev, kept, n)
        dev.source = source or dev.source
    host_c = entry.read_source(entry.host_c)
    target = target_of(meta)
    facts = _memory_facts(lambda: memory_facts.read(folder / memory_facts.FILE, library), notes)
    host = host_code.analyze(host_c, [k for d in devices for k in d.kernels]) if host_c is not None else None
    if host is None:
        unknown.append("host C: not kept in this build folder; launches, allocations and copies are unknown")
    else:
        notes.extend(host.problems)
        _with_peaks(host, facts, (target or {}).get("kind"))
    kernels = device_modules.kernels(devices, host.launches if host else [], notes)
    for k in kernels:
        if host is not None and not k.launches:
            notes.append(f"{k.name}: never launched by the host code")
    cuda = [d.source for d in devices if d.source is not None]
    ptx = device_modules.ptx(devices, target, unknown, _recorded_tvm_cuda(meta))
    sass = device_modules.sass(devices, unknown)
    model = _model(lambda: memory_plan_gather.from_library(library, (target or {}).get("kind"), host, host_c,
                                                          facts), notes)
    if model is not None and host is None:
        unknown.append(_NO_HOST_MODEL)
    return Report(
        origin=origin,
        library=_library_facts(library, str(library) if keep_paths else None, notes),
        target=target, key=meta.get("key"), build=build,
        functions=tuple(host.functions) if host else None,
        symbols={**(host.symbols if host else {}), **(model.symbols if model else {})},   # the caller's names
        kernels=tuple(kernels),
        allocations=tuple(host.allocations) if host else None,
        copies=tuple(host.copies) if host else None,
        parallel=tuple(host.parallel) if host else None,
        fatbin=device_modules.fatbin_entries(devices),
        compatibility=device_modules.compatibility(devices, _floor_of(meta), notes),
        unknown=tuple(unknown), notes=tuple(notes),
        host_c=host_c,
        cuda="\n".join(cuda) if cuda else None,
        host_c_path=str(entry.host_c) if keep_paths and host_c is not None else None,
        ptx=ptx, sass=sass, model=model,
    )


def inspect_library(path: str | Path, cache_dir: str | Path | None = None) -> Report:
    """Report on a shared library without its IR: what the binary holds, and what it cannot tell.

    A library that is a cache entry's lib.so is reported with the entry's sources.
    """
    library = Path(path).expanduser().absolute()
    if not library.is_file():
        raise InvalidInputError(f"no library at {library}")
    as_entry = Entry(library.parent)
    if as_entry.library == library and as_entry.meta_path.is_file() and as_entry.sources.is_dir():
        return inspect_entry(library.parent)
    unknown = [_NO_HOST]
    notes = [library_check.digest_note(library)]   # first: a file far longer than its headers is refused
    devices = device_modules.devices(library, notes)
    kernels = device_modules.kernels(devices, [], notes)
    if devices:
        unknown += [_NO_LOG, _NO_CUDA]
    facts = _library_facts(library, str(library), notes)
    key = _matching_entry(facts.sha256, cache_dir)
    if key:
        notes.append(f"this library is cache entry {key[:12]}: `jitflow inspect {key[:12]}` shows its host code, "
                     "launches and allocations")
    for d in devices:
        if d.fmt != "fatbin":
            notes.append(f"device module {d.index} holds {d.fmt!r}, not a fatbin")
    ptx, sass = device_modules.ptx(devices, None, unknown), device_modules.sass(devices, unknown)
    record = _memory_facts(lambda: memory_facts.read_library(library), notes)
    model = _model(lambda: memory_plan_gather.from_library(library, facts=record), notes)
    if model is not None:
        unknown.append(_NO_HOST_MODEL)
    return Report(origin="library", library=facts, key=key, kernels=tuple(kernels), model=model,
                  fatbin=device_modules.fatbin_entries(devices),
                  compatibility=device_modules.compatibility(devices, None, notes),
                  unknown=tuple(unknown), notes=tuple(notes),
                  cuda="\n".join(d.source for d in devices if d.source) or None,
                  ptx=ptx, sass=sass)


def _memory_facts(read: Any, notes: list[str]) -> memory_facts.MemoryFacts | None:
    """The build's memory record, or None (with a note) when it is there and cannot be read."""
    try:
        return read()
    except LibraryFormatError as exc:
        unreadable(notes, "the build's memory record (sizes are read from the bytecode and host C instead)", exc)
        return None


def _model(read: Any, notes: list[str]) -> Any:
    """The model's memory plan, or None (with a note) when its VM program cannot be read."""
    try:
        return read()
    except LibraryFormatError as exc:
        unreadable(notes, "the Relax VM program (the model's memory plan)", exc)
        return None


def _cache_folders(cache_dir: str | Path | None) -> Any:
    """The cache entries are read from (cache/store/location.py), whether or not builds use a cache now."""
    from ..cache.store.location import open_cache
    from ..config import resolve

    return open_cache(resolve(cache_dir=cache_dir, cache=True))


def _matching_entry(sha256: str, cache_dir: str | Path | None) -> str | None:
    """The key of the cache entry whose library has this sha256, if the cache holds one."""
    folders = _cache_folders(cache_dir).entry_folders()
    for folder in folders:
        meta = Entry(folder).read_meta()
        if meta is not None and meta.get("so_sha256") == sha256:
            return meta.get("key")
    return None


def inspect_entry(entry: str | Path, cache_dir: str | Path | None = None) -> Report:
    """Report on a cache entry: its folder, or its key (a unique prefix of 6 or more hex digits)."""
    folder = Path(entry).expanduser()
    if not folder.is_dir():
        text = str(entry).lower()
        if not re.fullmatch(r"[0-9a-f]{6,64}", text):
            raise InvalidInputError(f"{entry!r} is not a cache entry folder, a library or a cache key")
        caches = _cache_folders(cache_dir)
        found = caches.entry_folders(text)
        if not found:
            raise InvalidInputError(f"no cache entry with key {text}... in {caches.configured.root}")
        if len(found) > 1:
            raise InvalidInputError(f"the key prefix {text} is ambiguous: {', '.join(p.name[:16] for p in found)}")
        folder = found[0]
    found_entry = Entry(folder)
    meta = found_entry.read_meta()
    if meta is None:
        raise InvalidInputError(f"{folder} is not a cache entry (no readable {found_entry.meta_path.name})")
    lib = found_entry.library
    problem = library_problem(meta, lib.stat().st_size, sha256_file(lib)) if lib.is_file() else "library missing"
    if problem:
        raise LibraryFormatError(f"cache entry {folder.name[:12]}: its library does not match its metadata "
                                 f"({problem}; a later build of the module replaces it)")
    return inspect_folder(folder, meta, "cache-entry", build=f"cache entry {folder.name[:12]}")
