"""The plain-text form of a Report: a summary, then one table per section (kernels, memory)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from .c_expr import Expr

if TYPE_CHECKING:
    from .model import Compatibility, Kernel, Report


def table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns (the last one free)."""
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    fmt = lambda cells: indent + "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(list(map(str, header)))] + [fmt(r) for r in rows]


def size_text(size: Expr) -> str:
    if size.value is None:
        return f"{size.text} B"
    value = size.value
    if value >= 1 << 20:
        return f"{value} B ({value / (1 << 20):.1f} MiB)"
    if value >= 1 << 10:
        return f"{value} B ({value / (1 << 10):.1f} KiB)"
    return f"{value} B"


def dims(values: Sequence[Expr] | None) -> str:
    if values is None:
        return "-"
    return "(" + ", ".join(v.text for v in values) + ")"


def _where(rep: Report, line: int) -> str:
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


def header(rep: Report) -> list[str]:
    lines = []
    t = rep.target
    if t:
        what = t["kind"] + (f" {', '.join(t['archs'])}" if t.get("archs") else "")
        if t.get("cuda_compiler"):
            what += f" ({t['cuda_compiler']})"
        lines.append(f"target: {what}, host {t.get('host')}")
    if rep.build:
        lines.append(f"build: {rep.build}")
    lib = rep.library
    glibc = f", glibc >= {lib.glibc_baseline}" if lib.glibc_baseline else ", no versioned glibc symbols"
    lines.append(f"library: {lib.path or '(temporary build)'}, {lib.size} bytes, {lib.machine}{glibc}")
    if lib.cpu_level:
        needs = f"needs {', '.join(lib.cpu_needs)}" if lib.cpu_needs else f"runs on any {lib.machine} CPU"
        lines.append(f"cpu level: {lib.cpu_level}; {needs}")
    exported = [e[len("__tvm_ffi_"):] for e in lib.exports
                if e.startswith("__tvm_ffi_") and not e.startswith("__tvm_ffi__")]
    if exported:
        lines.append(f"exported functions: {', '.join(exported)}")
    if rep.fatbin:
        parts = [f"{e.kind} {e.arch}" + (f" ISA {e.isa}" if e.isa else "") + f" ({e.size} B)" for e in rep.fatbin]
        lines.append(f"fatbin: {', '.join(parts)}; {sum(e.size for e in rep.fatbin)} B in all")
    if rep.compatibility:
        lines.append(compatibility_line(rep.compatibility))
    if rep.symbols:
        lines.append("symbols: " + ", ".join(f"{k} = {v}" for k, v in rep.symbols.items()))
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


def kernels_section(rep: Report) -> list[str]:
    if not rep.kernels:
        return ["kernels: none (no device code)"]
    archs = [a.arch for a in rep.kernels[0].archs]
    rows = []
    for k in rep.kernels:
        args = ", ".join(f"{a.ctype} {a.name}" if a.ctype else a.dtype for a in k.args)
        if k.launches:
            for x in k.launches:
                rows.append([k.name, dims(x.grid), dims(x.block), size_text(x.dynamic_shared_memory),
                             _per_arch(k, "registers"), _spills(k), _where(rep, x.line), args])
        else:
            rows.append([k.name, "?", "?", "?", _per_arch(k, "registers"), _spills(k),
                         "params " + ", ".join(k.launch_params), args])
    regs = f"regs {'/'.join(archs)}" if len(archs) > 1 else "regs"
    out = [f"kernels ({len(rep.kernels)}):"]
    out += table(["name", "grid", "block", "dyn smem", regs, "spill B", "launch", "args"], rows)
    for k in rep.kernels:
        smem = {a.static_shared_memory for a in k.archs if a.static_shared_memory}
        if smem:
            out.append(f"  {k.name}: static shared memory {'/'.join(map(str, sorted(smem)))} B")
        if k.launch_bounds:
            out.append(f"  {k.name}: launch bounds {k.launch_bounds} threads")
    return out


def memory_section(rep: Report) -> list[str]:
    if rep.model is not None:
        from .model_text import model_section

        return model_section(rep.model) + (_host_copies(rep) if rep.copies else [])
    if rep.allocations is None:
        return ["allocations: unknown (no host code)", "copies: unknown (no host code)"]
    totals = rep.allocation_totals
    out = []
    if rep.allocations:
        rows = [[a.function, a.buffer, a.scope, a.device, a.dtype, size_text(a.size), _where(rep, a.line),
                 _where(rep, a.freed_line) if a.freed_line else "-"] for a in rep.allocations]
        out.append(f"allocations ({len(rep.allocations)}):")
        out += table(["function", "buffer", "scope", "device", "dtype", "size", "allocated", "freed"], rows)
        out.append(f"  total: {totals.count} allocation{'s' if totals.count != 1 else ''}, "
                   f"{size_text(totals.bytes)}")
    else:
        out.append("allocations: none (the host code allocates no workspace; kernels use their arguments)")
    if rep.copies is None:
        out.append("copies: unknown (no host code)")
    elif rep.copies:
        out += _host_copies(rep)
    else:
        out.append("copies: none (the generated code copies no data between host and device)")
    return out


def _host_copies(rep: Report) -> list[str]:
    copies = rep.copies or ()
    return [f"copies in the host code ({len(copies)}):"] + table(
        ["function", "call", "direction", "at", "args"],
        [[c.function, c.call, c.direction, _where(rep, c.line), ", ".join(c.args)] for c in copies])


def host_section(rep: Report) -> list[str]:
    """Per host function, what it does in order: allocate, launch, copy, free."""
    if rep.functions is None:
        return []
    out = []
    for f in rep.functions:
        events = []
        for a in rep.allocations or ():
            if a.function == f.name:
                events.append((a.line, f"alloc   {a.buffer}: {a.dtype}, {size_text(a.size)} ({a.device})"))
                if a.freed_line:
                    events.append((a.freed_line, f"free    {a.buffer}"))
        for x in rep.launches:
            if x.function == f.name:
                dyn = f", dyn smem {size_text(x.dynamic_shared_memory)}" if x.dynamic_shared_memory.value != 0 else ""
                events.append((x.line, f"launch  {x.kernel} grid {dims(x.grid)} block {dims(x.block)}{dyn}"))
        for c in rep.copies or ():
            if c.function == f.name:
                events.append((c.line, f"copy    {c.call} ({c.direction})"))
        out.append(f"host function {f.name} (host.c:{f.line}-{f.end_line}):")
        out += [f"  {line:>5}  {text}" for line, text in sorted(events)] or ["  (no launches, allocations or copies)"]
    return out


#: How the sources are named: as attributes of the report (Python) or as `jitflow inspect` options.
_SOURCE_NAMES = {"python": {"host": "rep.host_c", "cuda": "rep.cuda", "ptx": "rep.ptx[{}]", "sass": "rep.sass[{}]"},
                 "cli": {"host": "--section host", "cuda": "--section cuda", "ptx": "--section ptx ({})",
                         "sass": "--section sass ({})"}}


def render(rep: Report, names: str = "python") -> str:
    """The report as text; `names` "cli" names its sources as `jitflow inspect` options."""
    said = _SOURCE_NAMES[names]
    lines = [f"jitflow inspect: {rep.origin}" + (f" {rep.key[:12]}" if rep.key else "")]
    lines += header(rep)
    for section in (host_section(rep), kernels_section(rep), memory_section(rep)):
        if section:
            lines += [""] + section
    sources = []
    if rep.host_c is not None:
        sources.append(f"{said['host']} ({len(rep.host_c.splitlines())} lines"
                       + (f", {rep.host_c_path})" if rep.host_c_path else ")"))
    if rep.cuda is not None:
        sources.append(f"{said['cuda']} ({len(rep.cuda.splitlines())} lines)")
    if len(rep.ptx):
        sources.append(said["ptx"].format(", ".join(rep.ptx)))
    if len(rep.sass):
        sources.append(said["sass"].format(", ".join(rep.sass)))
    if sources:
        lines += ["", "sources: " + "; ".join(sources)]
    if rep.notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in rep.notes]
    if rep.unknown:
        lines += ["", "not known here:"] + [f"  - {u}" for u in rep.unknown]
    return "\n".join(lines)
