"""The plain-text form of a report's parts: sizes and dims, the header lines, the kernel table, the
allocations and copies of a library of kernels, and each host function's sequence of events.

Each function takes the parts it prints (not the Report), so that the data types stay below their
text; report.py puts the sections together.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..formats.c_expr import Expr
from ..text.format import exact_bytes, table
from .types import Allocation, AllocationTotals, Compatibility, Copy, FatbinEntry, HostFunction, Kernel, Launch
from .types import LibraryFacts, ParallelLaunch


def size_text(size: Expr) -> str:
    """'4096 B (4.0 KiB)', or the expression of the symbols: 'n * 32 B'."""
    return f"{size.text} B" if size.value is None else exact_bytes(size.value)


def dims(values: Sequence[Expr] | None) -> str:
    if values is None:
        return "-"
    return "(" + ", ".join(v.text for v in values) + ")"


def shape_text(shape: Mapping[str, int]) -> str:
    """'n = 32, s = 128': the shape a report was evaluated at."""
    return ", ".join(f"{k} = {v}" for k, v in shape.items())


def symbols_text(symbols: Mapping[str, str], shape: Mapping[str, int]) -> str:
    """'n = 32 (x.shape[0]), s = x.shape[1]': each symbol's value where it is bound, and where it comes from."""
    return ", ".join(f"{k} = {shape[k]} ({v})" if k in shape else f"{k} = {v}" for k, v in symbols.items())


def where(line: int) -> str:
    """A line of the host C, as the text names it."""
    return f"host.c:{line}"


def _per_arch(kernel: Kernel, field: str) -> str:
    values = [getattr(a, field) for a in kernel.archs]
    if not values or all(v is None for v in values):
        return "?"
    if len(set(values)) == 1:
        return str(values[0])
    return "/".join("?" if v is None else str(v) for v in values)


def _spills(kernel: Kernel) -> str:
    """Spilled bytes (stores + loads) per arch, as ptxas reported them."""
    values = [None if a.spill_stores is None else a.spill_stores + (a.spill_loads or 0) for a in kernel.archs]
    if not values or all(v is None for v in values):
        return "?"
    return str(values[0]) if len(set(values)) == 1 else "/".join("?" if v is None else str(v) for v in values)


def header_lines(target: Mapping[str, Any] | None, build: str | None, library: LibraryFacts,
                 fatbin: Sequence[FatbinEntry], compatibility: Compatibility | None,
                 symbols: Mapping[str, str], shape: Mapping[str, int] | None = None) -> list[str]:
    lines = []
    if target:
        what = target["kind"] + (f" {', '.join(target['archs'])}" if target.get("archs") else "")
        if target.get("cuda_compiler"):
            what += f" ({target['cuda_compiler']})"
        lines.append(f"target: {what}, host {target.get('host')}")
    if build:
        lines.append(f"build: {build}")
    glibc = f", glibc >= {library.glibc_baseline}" if library.glibc_baseline else ", no versioned glibc symbols"
    lines.append(f"library: {library.path or '(temporary build)'}, {library.size} bytes, {library.machine}{glibc}")
    if library.cpu_level:
        needs = (f"needs {', '.join(library.cpu_needs)}" if library.cpu_needs
                 else f"runs on any {library.machine} CPU")
        lines.append(f"cpu level: {library.cpu_level}; {needs}")
    exported = [e[len("__tvm_ffi_"):] for e in library.exports
                if e.startswith("__tvm_ffi_") and not e.startswith("__tvm_ffi__")]
    if exported:
        lines.append(f"exported functions: {', '.join(exported)}")
    if fatbin:
        parts = [f"{e.kind} {e.arch}" + (f" ISA {e.isa}" if e.isa else "") + f" ({e.size} B)" for e in fatbin]
        lines.append(f"fatbin: {', '.join(parts)}; {sum(e.size for e in fatbin)} B in all")
    if compatibility:
        lines.append(compatibility_line(compatibility))
    if symbols:
        lines.append("symbols: " + symbols_text(symbols, shape or {}))
    return lines


def compatibility_line(c: Compatibility) -> str:
    """'runs on: SASS sm_80, sm_90 (CUDA 13.5, driver >= 13.0); PTX compute_80 ISA 9.0 (driver >= 13.0); ...'"""
    parts = []
    if c.sass:
        built = f"CUDA {c.sass_toolkit}, " if c.sass_toolkit else ""
        parts.append(f"SASS {', '.join(c.sass)} ({built}driver >= {c.sass_min_driver or '?'})")
    for arch, isa in c.ptx:
        parts.append(f"PTX {arch} ISA {isa} (driver >= {c.ptx_min_driver or 'any'})")
    floor = f", CUDA floor {c.floor}" if c.floor else ""
    return f"runs on: {'; '.join(parts)}; needs a driver of CUDA >= {c.min_driver or '?'}{floor}"


def kernels_section(kernels: Sequence[Kernel]) -> list[str]:
    if not kernels:
        return ["kernels: none (no device code)"]
    archs = [a.arch for a in kernels[0].archs]
    rows = []
    for k in kernels:
        args = ", ".join(f"{a.ctype} {a.name}" if a.ctype else a.dtype for a in k.args)
        if k.launches:
            for x in k.launches:
                rows.append([k.name, dims(x.grid), dims(x.block), size_text(x.dynamic_shared_memory),
                             _per_arch(k, "registers"), _spills(k), where(x.line), args])
        else:
            rows.append([k.name, "?", "?", "?", _per_arch(k, "registers"), _spills(k),
                         "params " + ", ".join(k.launch_params), args])
    regs = f"regs {'/'.join(archs)}" if len(archs) > 1 else "regs"
    out = [f"kernels ({len(kernels)}):"]
    out += table(["name", "grid", "block", "dyn smem", regs, "spill B", "launch", "args"], rows, indent="  ")
    for k in kernels:
        smem = {a.static_shared_memory for a in k.archs if a.static_shared_memory}
        if smem:
            out.append(f"  {k.name}: static shared memory {'/'.join(map(str, sorted(smem)))} B")
        if k.launch_bounds:
            out.append(f"  {k.name}: launch bounds {k.launch_bounds} threads")
    return out


def allocations_section(allocations: Sequence[Allocation] | None, totals: AllocationTotals | None,
                        copies: Sequence[Copy] | None) -> list[str]:
    """The workspaces a library of kernels allocates and the copies its host code makes."""
    if allocations is None or totals is None:
        return ["allocations: unknown (no host code)", "copies: unknown (no host code)"]
    out = []
    if allocations:
        rows = [[a.function, a.buffer, a.scope, a.device, a.dtype, size_text(a.size), where(a.line),
                 where(a.freed_line) if a.freed_line else "-"] for a in allocations]
        out.append(f"allocations ({len(allocations)}):")
        out += table(["function", "buffer", "scope", "device", "dtype", "size", "allocated", "freed"], rows,
                     indent="  ")
        out.append(f"  total: {totals.count} allocation{'s' if totals.count != 1 else ''}, "
                   f"{size_text(totals.bytes)}")
    else:
        out.append("allocations: none (the host code allocates no workspace; kernels use their arguments)")
    if copies is None:
        out.append("copies: unknown (no host code)")
    elif copies:
        out += host_copies(copies)
    else:
        out.append("copies: none (the generated code copies no data between host and device)")
    return out


def host_copies(copies: Sequence[Copy]) -> list[str]:
    return [f"copies in the host code ({len(copies)}):"] + table(
        ["function", "call", "direction", "at", "args"],
        [[c.function, c.call, c.direction, where(c.line), ", ".join(c.args)] for c in copies], indent="  ")


def parallel_text(x: ParallelLaunch) -> str:
    """'parallel i < 64 (chunks) on TVM's thread pool: jitflow_parallel_main_0 (host.c:120)'."""
    loops = ", ".join(f"{p.var} < {p.extent.text} ({p.schedule})" for p in x.loops) or "no loop found"
    barriers = f", {x.barriers} barrier{'s' if x.barriers != 1 else ''}" if x.barriers else ""
    body = f"{x.body} ({where(x.body_line)})" if x.body_line else x.body
    return f"parallel {loops}{barriers} on TVM's thread pool: {body}"


def host_section(functions: Sequence[HostFunction] | None, allocations: Sequence[Allocation] | None,
                 launches: Sequence[Launch], copies: Sequence[Copy] | None,
                 parallel: Sequence[ParallelLaunch] | None = None) -> list[str]:
    """Per host function, what it does in order: allocate, launch (kernels, parallel loops on TVM's
    thread pool), copy, free."""
    if functions is None:
        return []
    out = []
    for f in functions:
        events = []
        for a in allocations or ():
            if a.function == f.name:
                events.append((a.line, f"alloc   {a.buffer}: {a.dtype}, {size_text(a.size)} ({a.device})"))
                if a.freed_line:
                    events.append((a.freed_line, f"free    {a.buffer}"))
        for x in launches:
            if x.function == f.name:
                dyn = f", dyn smem {size_text(x.dynamic_shared_memory)}" if x.dynamic_shared_memory.value != 0 else ""
                events.append((x.line, f"launch  {x.kernel} grid {dims(x.grid)} block {dims(x.block)}{dyn}"))
        for c in copies or ():
            if c.function == f.name:
                events.append((c.line, f"copy    {c.call} ({c.direction})"))
        for p in parallel or ():
            if p.function == f.name:
                events.append((p.line, parallel_text(p)))
        peak = f", workspace peak {size_text(f.peak)}" if f.peak is not None and f.peak.value != 0 else ""
        out.append(f"host function {f.name} (host.c:{f.line}-{f.end_line}){peak}:")
        out += [f"  {line:>5}  {text}" for line, text in sorted(events)] or ["  (no launches, allocations or copies)"]
    return out
