"""The CUDA device modules a library holds, read from its bytes: their kernels (with what the CUDA
source, the cubins and ptxas' log say of each), fatbin entries, PTX and SASS, and the drivers that
load them. gather.py joins them with the host code and the build's records into a Report.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache.store.entry import Entry
from ..errors import LibraryFormatError, TargetError, ToolMissingError
from ..formats import cubin, fatbin, library_blob, ptxas_log
from ..formats.library_blob import KernelInfo
from ..runtime import compat
from ..targets import arch_number, normalize_arch
from ..targets.cuda_floor import CudaVersion, cuda_for_ptx_isa, parse_isa
from . import device_text
from .types import Compatibility, FatbinEntry, Kernel, KernelArch, KernelArg

_GLOBAL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\((\d+)[^)]*\)\s+)?(\w+)\s*\(([^)]*)\)\s*\{")


@dataclass
class Device:
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


def devices(library: Path, notes: list[str]) -> list[Device]:
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
        dev = Device(index, payload.fmt, payload.kernels, payload.data)
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


def sorted_archs(archs: Any) -> list[str]:
    return sorted(set(archs), key=_arch_order)


def kernels(devices: list[Device], launches: list[Any], notes: list[str]) -> list[Kernel]:
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
            for arch in sorted_archs(sass_archs + log_archs):
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


def _fatbin_ptx(devices: list[Device], unknown: list[str]) -> dict[str, str]:
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


def ptx(devices: list[Device], target: dict[str, Any] | None, unknown: list[str],
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

        return device_text.DeviceText("PTX", sorted_archs(target["archs"]), make,
                                      f"the fatbin's PTX for its lowest arch; made from the CUDA source by "
                                      f"{compiler} on access for the others")
    return device_text.DeviceText("PTX", sorted_archs(shipped), shipped.__getitem__,
                                  unknown[-1] if unknown and unknown[-1].startswith("PTX text") else None)


def sass(devices: list[Device], unknown: list[str]) -> device_text.DeviceText:
    archs = sorted_archs(a for d in devices for a in d.cubins)
    tool = device_text.find_sass_tool()

    def make(arch: str) -> str:
        if tool is None:
            raise ToolMissingError(device_text.SASS_MISSING)
        return "\n".join(device_text.disassemble(d.cubins[arch], tool) for d in devices if arch in d.cubins)

    if tool is None and archs:
        unknown.append(device_text.SASS_MISSING)
    return device_text.DeviceText("SASS", archs, make,
                                  device_text.SASS_MISSING if tool is None else f"disassembled by {tool[0]}")


def kept_sources(entry: Entry) -> list[tuple[str | None, str | None]]:
    """(CUDA source, compiler log) of each device module as lowered, from src/."""
    out: list[tuple[str | None, str | None]] = []
    while entry.kernels_source(len(out)).exists():
        n = len(out)
        out.append((entry.read_source(entry.kernels_source(n)), entry.read_source(entry.kernels_log(n))))
    return out


def kept_for(dev: Device, kept: list[tuple[str | None, str | None]], n: int) -> tuple[str | None, str | None]:
    """The kept source and log of a device module: those defining its kernels (a module compiled in
    pieces is several modules in the library, with one source), else the n-th."""
    for source, log_text in kept:
        if source and dev.kernels and all(f" {k.name}(" in source for k in dev.kernels):
            return source, log_text
    return kept[n] if n < len(kept) else (None, None)


def fatbin_entries(devices: list[Device]) -> tuple[FatbinEntry, ...]:
    return tuple(FatbinEntry(d.index, e.kind, e.arch, e.size, e.isa) for d in devices for e in d.entries)


def compatibility(devices: list[Device], floor: str | None, notes: list[str]) -> Compatibility | None:
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
