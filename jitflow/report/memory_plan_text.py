"""The plain-text form of a model's memory plan (ModelMemory): start-up, then each VM function per call."""
from __future__ import annotations

from typing import Mapping

from ..formats import c_expr
from ..text.format import plural, table
from .memory_plan import DEPENDS, ModelMemory, ModelStorage, VMFunction
from .text import dims, size_text, symbols_text, where


def size_or_depends(size: object) -> str:
    """A size as text, or "depends on shape" where the report cannot know it."""
    return DEPENDS if size is None else size_text(size)  # type: ignore[arg-type]


def startup_line(model: ModelMemory) -> str:
    n, nbytes = len(model.constants), model.constant_bytes
    if not n:
        return "start-up: no constants (weights are passed as arguments, or there are none)"
    where = ("copied host->device once, when the VM starts" if model.upload
             else "used in place (the VM runs on the host)")
    return f"start-up: {plural(n, 'constant')} (weights), {size_text(c_expr.constant(nbytes))}, {where}"


def _counted(n: int | None, word: str, many: str, size: object = None) -> str:
    if n is None:
        return f"{many} unknown"
    return plural(n, word, many) + (f", {size_or_depends(size)}" if n and size is not False else "")


def peak_text(f: VMFunction) -> str:
    """'peak 1024 B (1.0 KiB)' (on the VM's device; others in brackets), or what keeps it unknown."""
    if f.peak is None:
        return "peak unknown (a size or a workspace is not known here)"
    others = [f"{d} {size_or_depends(p)}" for d, p in f.peaks.items() if p is not None and p != f.peak]
    return f"peak {size_text(f.peak)}" + (f" ({', '.join(others)})" if others else "")


def per_call_line(f: VMFunction) -> str:
    t = f.totals
    assert t is not None
    parts = [_counted(t.storages, "storage", "storages", t.storage_bytes), peak_text(f),
             _counted(None if f.workspaces is None else t.workspaces, "workspace", "workspaces", t.workspace_bytes),
             _counted(t.copies, "copy", "copies", t.copy_bytes),
             _counted(t.launches, "launch", "launches", False) + (f" ({t.replayed} replayed)" if t.replayed else "")]
    if t.cached_storages:
        parts.append(f"{plural(t.cached_storages, 'cached storage')}, {size_or_depends(t.cached_bytes)}, "
                     "allocated once (not per call)")
    return "per call: " + "; ".join(parts)


def _marks(s: ModelStorage) -> str:
    return " ".join(m for m, on in (("(output)", s.holds_output), ("(cached: allocated once)", s.cached)) if on)


def function_section(f: VMFunction) -> list[str]:
    folded = f" (CUDA graph: {', '.join(f.folded)} folded in)" if f.folded else ""
    out = [f"{f.name}({', '.join(f.params)}), each call{folded}:"]
    if f.storages:
        rows = [[f"#{s.index}", size_or_depends(s.size), s.device + ("" if s.scope == "global" else f" {s.scope}"),
                 "-" if s.live is None else f"{s.live[0]}-{s.live[1]}",
                 ", ".join(str(t) for t in s.tensors) or "none", _marks(s)] for s in f.storages]
        out += table(["storage", "size", "device", "live", "tensors placed in it (in turn)", ""], rows, indent="    ")
        if f.length is not None:
            out.append(f"    (live: from allocation to last release, as positions in {f.name}'s bytecode, "
                       f"0 to {f.length - 1})")
    else:
        out.append("    storage: none")
    out.append(f"    calls: {', '.join(f.calls) or 'none'}")
    if f.launches is None:
        out.append("    launches: unknown (no host code)")
    elif f.launches:
        out.append(f"    launches ({len(f.launches)}):")
        out += table(["kernel", "grid", "block", "at", "from", ""],
                     [[x.kernel, dims(x.grid), dims(x.block), "-" if x.position is None else str(x.position),
                       f"{x.function} ({where(x.line)})", "replayed (CUDA graph)" if x.replayed else ""]
                      for x in f.launches], indent="      ")
    else:
        out.append("    launches: none")
    if f.workspaces is None:
        out.append("    workspaces: unknown (no host code)")
    elif f.workspaces:
        out.append(f"    workspaces ({len(f.workspaces)}), allocated by the TIR functions:")
        out += table(["function", "buffer", "device", "size", "at"],
                     [[a.function, a.buffer, a.device, size_text(a.size), where(a.line)] for a in f.workspaces],
                     indent="      ")
    else:
        out.append("    workspaces: none")
    if f.copies:
        out.append(f"    copies ({len(f.copies)}):")
        rows = [[c.call, c.direction, size_or_depends(c.size), c.tensor or "?"] for c in f.copies]
        out += table(["call", "direction", "bytes", "tensor"], rows, indent="      ")
    else:
        out.append("    copies: none")
    out.append("    " + per_call_line(f))
    return ["  " + line if not line.startswith("    ") else line for line in out]


def model_section(model: ModelMemory, shape: Mapping[str, int] | None = None) -> list[str]:
    """The model view: what the VM allocates and copies at start-up and on each call (`shape`: the
    symbols the report was evaluated at)."""
    out = [f"model memory (Relax VM on {model.devices[0]}" + (f", host {model.devices[-1]}" if len(model.devices) > 1
                                                               else "") + "):",
           "  " + startup_line(model)]
    for f in model.functions:
        out += function_section(f)
    if model.symbols:
        out.append("  symbols: " + symbols_text(model.symbols, shape or {}))
    if model.not_called:
        out.append(f"  compiled but never called by the bytecode: {', '.join(model.not_called)}")
    out += [f"  note: {n}" for n in model.notes]
    return out
