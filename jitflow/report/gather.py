"""Gather a Report from a build: its cache entry (library, metadata, kept sources) or a bare library.

With the sources (a fresh build, a cache hit, a cache entry) the report has the host C, the CUDA
source, every launch and allocation the host code makes, and ptxas' figures; from a library alone
it has what the binary holds (kernels, fatbin entries and sizes, registers, launch parameter tags,
host symbols, CPU and glibc) and says what it cannot know.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..cache.entry import Entry, library_problem, sha256_file, target_of
from ..errors import InvalidInputError, LibraryFormatError, TargetError, ToolMissingError
from ..formats import c_expr
from ..formats import cubin, elf, fatbin, library_blob, memory_facts, ptxas_log
from ..formats.library_blob import KernelInfo
from ..runtime import compat, library_check
from ..targets import arch_number, normalize_arch
from ..targets.cuda_floor import CudaVersion, cuda_for_ptx_isa, parse_isa
from . import device_text, host_code, memory_plan_gather
from .report import Report
from .types import Compatibility, FatbinEntry, Kernel, KernelArch, KernelArg, LibraryFacts

_GLOBAL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\((\d+)[^)]*\)\s+)?(\w+)\s*\(([^)]*)\)\s*\{")
_NO_HOST = ("launch dimensions, device allocations and copies: decided by the host code compiled into the "
            "library; inspect the module (FILE.py:NAME) or its cache entry to see them")
_NO_LOG = "spills and static shared memory: ptxas reports them at build time (a cache entry keeps that log)"
_NO_CUDA = "CUDA source: not embedded (the fatbin holds SASS and PTX only)"
_NO_HOST_MODEL = ("Relax VM without its host C: sizes computed by shape functions, the TIR functions' "
                  "workspaces and the kernel launches of each call; inspect the module or its cache entry")


@dataclass
class _Device:
    """One CUDA module of the library: its kernels, fatbin entries, cubins per arch, kept files."""

    index: int
    fmt: str
    kernels: list[KernelInfo]
    data: bytes
    entries: list[fatbin.FatbinEntry] = field(default_factory=list)
    cubins: dict[str, bytes] = field(default_factory=dict)
    source: str | None = None
    log: str | None = None


def unreadable(notes: list[str], part: str, exc: Exception) -> None:
    """Say in the report's notes that `part` of the library could not be read, and why: the rest of
    the report stands without it (every reader of library bytes raises LibraryFormatError on
    malformed input, and the report is made of what reads)."""
    notes.append(f"unreadable: {part}: {exc}")


def _devices(library: Path, notes: list[str]) -> list[_Device]:
    try:
        raw = library_blob.blob_of(library)
        modules = library_blob.parse(raw).modules if raw is not None else []
    except LibraryFormatError as exc:
        unreadable(notes, "the library's module blob (its kernels, fatbins and VM program)", exc)
        return []
    out = []
    for index, module in enumerate(modules):
        if module.kind != "cuda":
            continue
        try:
            payload = library_blob.parse_cuda_payload(module.payload or b"")
        except LibraryFormatError as exc:
            unreadable(notes, f"device module {index}", exc)
            continue
        dev = _Device(index, payload.fmt, payload.kernels, payload.data)
        if payload.fmt == "fatbin":
            try:
                dev.entries = fatbin.entries(payload.data)
                for e in dev.entries:
                    body = fatbin.payload(payload.data, e)
                    if e.kind == "sass" and cubin.is_cubin(body):
                        dev.cubins[e.arch] = body
            except LibraryFormatError as exc:
                unreadable(notes, f"the fatbin of device module {index}", exc)
                dev.entries, dev.cubins = [], {}
        elif payload.fmt == "cuda":
            dev.source = payload.data.decode("utf-8", errors="replace")
        out.append(dev)
    return out


def _signatures(source: str | None) -> dict[str, tuple[int | None, list[tuple[str, str]]]]:
    """kernel -> (launch bounds, [(C type, name)]) from the CUDA source's definitions."""
    out: dict[str, tuple[int | None, list[tuple[str, str]]]] = {}
    for m in _GLOBAL.finditer(source or ""):
        params = []
        for p in (x.strip() for x in m.group(3).split(",")):
            if not p:
                continue
            tokens = p.replace("*", "* ").replace("__restrict__", "").split()
            params.append((" ".join(tokens[:-1]).replace(" *", "*"), tokens[-1]))
        out[m.group(2)] = (int(m.group(1)) if m.group(1) else None, params)
    return out


def _arch_order(arch: str) -> tuple[int, str]:
    try:
        return arch_number(arch), arch
    except TargetError:      # not an arch in jitflow's spelling (a damaged log): after the others
        return 1 << 30, arch


def _sorted_archs(archs: Any) -> list[str]:
    return sorted(set(archs), key=_arch_order)


def _kernels(devices: list[_Device], launches: list[Any], notes: list[str]) -> list[Kernel]:
    out = []
    for dev in devices:
        signatures = _signatures(dev.source)
        resources = ptxas_log.parse(dev.log or "")
        in_cubin = {}
        for arch, code in dev.cubins.items():
            try:
                in_cubin[arch] = cubin.kernels(code)
            except LibraryFormatError as exc:
                unreadable(notes, f"the {arch} cubin of device module {dev.index}", exc)
        sass_archs = [e.arch for e in dev.entries if e.kind == "sass"]
        for info in dev.kernels:
            bounds, params = signatures.get(info.name, (None, []))
            if params and len(params) != len(info.arg_types):
                notes.append(f"{info.name}: the CUDA source has {len(params)} parameters, the function info "
                             f"{len(info.arg_types)}")
                params = []
            args = tuple(KernelArg(params[i][1] if params else None, params[i][0] if params else None, t)
                         for i, t in enumerate(info.arg_types))
            archs = []
            log_archs = [a for (k, a) in resources if k == info.name and a.startswith("sm_")]
            for arch in _sorted_archs(sass_archs + log_archs):
                cub = in_cubin.get(arch, {}).get(info.name)
                res = resources.get((info.name, arch), ptxas_log.Resources())
                if arch in sass_archs and cub is None and arch in in_cubin:
                    notes.append(f"{info.name}: the fatbin's {arch} code has no such kernel")
                if cub and res.registers is not None and cub.registers != res.registers:
                    notes.append(f"{info.name} on {arch}: the cubin says {cub.registers} registers, "
                                 f"the compiler log {res.registers}")
                archs.append(KernelArch(
                    arch, sass=cub is not None,
                    registers=cub.registers if cub and cub.registers is not None else res.registers,
                    spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                    stack_frame=cub.stack_frame if cub and cub.stack_frame is not None else res.stack_frame,
                    static_shared_memory=res.static_shared_memory))
            mine = tuple(x for x in launches if x.kernel == info.name)
            for x in mine:
                threads = x.threads_per_block
                if bounds and threads.value is not None and threads.value > bounds:
                    notes.append(f"{info.name}: host.c:{x.line} launches {threads.value} threads per block, "
                                 f"above its launch bounds {bounds}")
            out.append(Kernel(info.name, dev.index, args, tuple(info.launch_params), bounds, mine, tuple(archs)))
    return out


def _library_facts(library: Path, path: str | None, notes: list[str]) -> LibraryFacts:
    try:
        facts = elf.read(library)
    except LibraryFormatError as exc:
        unreadable(notes, "the ELF tables (CPU, glibc baseline, exports)", exc)
        facts = elf.ElfInfo("unknown", 64, None)
    level, needs = library_check.recorded_cpu(library)
    return LibraryFacts(path, library.stat().st_size, sha256_file(library), facts.machine, facts.glibc_baseline,
                        tuple(facts.exported), level, needs)


def _fatbin_ptx(devices: list[_Device], unknown: list[str]) -> dict[str, str]:
    """arch -> the PTX text the fatbins ship (decompressed): what a driver JIT-compiles."""
    readable: dict[str, str] = {}
    compressed = []
    for d in devices:
        for e in d.entries:
            if e.kind == "ptx":
                try:
                    text = device_text.readable_ptx(fatbin.contents(d.data, e))
                except LibraryFormatError:
                    text = None
                if text is None:
                    compressed.append(e.arch)
                else:
                    readable[normalize_arch(e.arch)] = readable.get(normalize_arch(e.arch), "") + text
    if compressed:
        unknown.append(f"PTX text: the fatbin stores {', '.join(compressed)} compressed in a format jitflow does "
                       "not read; the CUDA source is needed to show it")
    return readable


def _recorded_tvm_cuda(meta: dict[str, Any]) -> dict[str, Any]:
    """The TVM_CUDA_* settings a build's key recorded (they shape its device code)."""
    found = (((meta.get("key_inputs") or {}).get("options")) or {}).get("environment")
    return {k: v for k, v in found.items() if str(k).startswith("TVM_CUDA_")} if isinstance(found, dict) else {}


def _ptx(devices: list[_Device], target: dict[str, Any] | None, unknown: list[str],
         tvm_cuda: dict[str, Any] | None = None) -> device_text.DeviceText:
    shipped = _fatbin_ptx(devices, unknown)
    with_source = [d for d in devices if d.source is not None]
    if with_source and target and target.get("archs"):
        compiler = target.get("cuda_compiler") or "nvrtc"
        options = target.get("device_options") or []

        def make(arch: str) -> str:
            if arch in shipped:   # the lowest arch: the PTX the fatbin carries, at the floor's ISA
                return shipped[arch]
            return "\n".join(device_text.ptx_from_source(d.source or "", arch, compiler, options, tvm_cuda)
                             for d in with_source)

        return device_text.DeviceText("PTX", _sorted_archs(target["archs"]), make,
                                      f"the fatbin's PTX for its lowest arch; made from the CUDA source by "
                                      f"{compiler} on access for the others")
    return device_text.DeviceText("PTX", _sorted_archs(shipped), shipped.__getitem__,
                                  unknown[-1] if unknown and unknown[-1].startswith("PTX text") else None)


def _sass(devices: list[_Device], unknown: list[str]) -> device_text.DeviceText:
    archs = _sorted_archs(a for d in devices for a in d.cubins)
    tool = device_text.find_sass_tool()

    def make(arch: str) -> str:
        if tool is None:
            raise ToolMissingError(device_text.SASS_MISSING)
        return "\n".join(device_text.disassemble(d.cubins[arch], tool) for d in devices if arch in d.cubins)

    if tool is None and archs:
        unknown.append(device_text.SASS_MISSING)
    return device_text.DeviceText("SASS", archs, make,
                                  device_text.SASS_MISSING if tool is None else f"disassembled by {tool[0]}")


def _kept_sources(entry: Entry) -> list[tuple[str | None, str | None]]:
    """(CUDA source, compiler log) of each device module as lowered, from src/."""
    out: list[tuple[str | None, str | None]] = []
    while entry.kernels_source(len(out)).exists():
        n = len(out)
        out.append((entry.read_source(entry.kernels_source(n)), entry.read_source(entry.kernels_log(n))))
    return out


def _kept_for(dev: _Device, kept: list[tuple[str | None, str | None]], n: int) -> tuple[str | None, str | None]:
    """The kept source and log of a device module: those defining its kernels (a module compiled in
    pieces is several modules in the library, with one source), else the n-th."""
    for source, log_text in kept:
        if source and dev.kernels and all(f" {k.name}(" in source for k in dev.kernels):
            return source, log_text
    return kept[n] if n < len(kept) else (None, None)


def _fatbin_entries(devices: list[_Device]) -> tuple[FatbinEntry, ...]:
    return tuple(FatbinEntry(d.index, e.kind, e.arch, e.size, e.isa) for d in devices for e in d.entries)


def _compatibility(devices: list[_Device], floor: str | None, notes: list[str]) -> Compatibility | None:
    """The SASS and PTX the fatbins carry and the oldest drivers that load them."""
    fatbins = [d.data for d in devices if d.fmt == "fatbin" and d.entries]
    if not fatbins:
        return None
    try:
        code = compat.device_code_of_fatbins(fatbins)
    except LibraryFormatError as exc:
        unreadable(notes, "the device code the fatbins carry (which GPUs and drivers run it)", exc)
        return None
    sass_min = CudaVersion(code.sass_toolkit.major, 0) if code.sass and code.sass_toolkit else None
    ptx_needs = [cuda_for_ptx_isa(parse_isa(isa)) for _, isa in code.ptx]
    ptx_min = max((n for n in ptx_needs if n is not None), default=None)
    needs = [v for v in (sass_min, ptx_min) if v is not None]
    text = lambda v: None if v is None else str(v)  # noqa: E731
    return Compatibility(code.sass, code.ptx, text(code.sass_toolkit), text(sass_min), text(ptx_min),
                         text(max(needs) if needs else None), floor)


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
    devices = _devices(library, notes)
    kept = _kept_sources(entry)
    for n, dev in enumerate(devices):
        source, dev.log = _kept_for(dev, kept, n)
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
    kernels = _kernels(devices, host.launches if host else [], notes)
    for k in kernels:
        if host is not None and not k.launches:
            notes.append(f"{k.name}: never launched by the host code")
    cuda = [d.source for d in devices if d.source is not None]
    ptx, sass = _ptx(devices, target, unknown, _recorded_tvm_cuda(meta)), _sass(devices, unknown)
    model = _model(lambda: memory_plan_gather.from_library(library, (target or {}).get("kind"), host, host_c,
                                                          facts), notes)
    if model is not None and host is None:
        unknown.append(_NO_HOST_MODEL)
    return Report(
        origin=origin,
        library=_library_facts(library, str(library) if keep_paths else None, notes),
        target=target, key=meta.get("key"), build=build,
        functions=tuple(host.functions) if host else None,
        symbols=dict(host.symbols) if host else {},
        kernels=tuple(kernels),
        allocations=tuple(host.allocations) if host else None,
        copies=tuple(host.copies) if host else None,
        parallel=tuple(host.parallel) if host else None,
        fatbin=_fatbin_entries(devices), compatibility=_compatibility(devices, _floor_of(meta), notes),
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
    devices = _devices(library, notes)
    kernels = _kernels(devices, [], notes)
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
    ptx, sass = _ptx(devices, None, unknown), _sass(devices, unknown)
    record = _memory_facts(lambda: memory_facts.read_library(library), notes)
    model = _model(lambda: memory_plan_gather.from_library(library, facts=record), notes)
    if model is not None:
        unknown.append(_NO_HOST_MODEL)
    return Report(origin="library", library=facts, key=key, kernels=tuple(kernels), model=model,
                  fatbin=_fatbin_entries(devices), compatibility=_compatibility(devices, None, notes),
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
    """The cache entries are read from (cache/location.py), whether or not builds use a cache now."""
    from ..cache.location import open_cache
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
