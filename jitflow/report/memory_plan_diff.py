"""What changed in a model's memory between two builds: per call of each VM function (storage,
workspaces, copies, launches and the kernels launched) and at start-up (the constants)."""
from __future__ import annotations

from typing import Any

from .memory_plan import ModelMemory, ModelStorage, VMFunction
from .memory_plan_text import size_or_depends as _size

#: One model fact that differs: what (e.g. "main storage per call"), its text in a and in b.
ModelChange = tuple[str, str, str]


def _count(n: int | None, size: Any = None, with_size: bool = True) -> str:
    if n is None:
        return "?"
    return f"{n}, {_size(size)}" if with_size and n else str(n)


def _storage(s: ModelStorage) -> str:
    return f"{_size(s.size)} {s.device}: {', '.join(str(t) for t in s.tensors) or 'no tensors'}"


def _facts(f: VMFunction) -> dict[str, str]:
    t = f.totals
    facts = {
        "storage per call": _count(t.storages, t.storage_bytes),
        "workspaces per call": "?" if f.workspaces is None else _count(t.workspaces, t.workspace_bytes),
        "copies per call": _count(t.copies, t.copy_bytes),
        "launches per call": _count(t.launches, with_size=False),
        "calls": ", ".join(f.calls) or "none",
    }
    if f.launches is not None:
        facts["kernels launched"] = ", ".join(x.kernel for x in f.launches) or "none"
    for s in f.storages:
        facts[f"storage #{s.index}"] = _storage(s)
    return facts


def model_changes(a: ModelMemory | None, b: ModelMemory | None) -> list[ModelChange]:
    """The differences between two model views (none when neither build is a Relax model)."""
    if a is None and b is None:
        return []
    if a is None or b is None:
        return [("Relax VM", "no" if a is None else "yes", "no" if b is None else "yes")]
    out = []
    startup = (f"{len(a.constants)} constants, {a.constant_bytes} B", f"{len(b.constants)} constants, "
               f"{b.constant_bytes} B")
    if startup[0] != startup[1]:
        out.append(("start-up upload", *startup))
    fa, fb = {f.name: f for f in a.functions}, {f.name: f for f in b.functions}
    for name in dict.fromkeys([*fa, *fb]):
        if name not in fa or name not in fb:
            out.append((f"VM function {name}", "absent" if name not in fa else "present",
                                   "absent" if name not in fb else "present"))
            continue
        xa, xb = _facts(fa[name]), _facts(fb[name])
        for what in dict.fromkeys([*xa, *xb]):
            if xa.get(what, "-") != xb.get(what, "-"):
                out.append((f"{name} {what}", xa.get(what, "-"), xb.get(what, "-")))
    return out


def per_call(model: ModelMemory | None) -> dict[str, Any] | None:
    """Each VM function's per-call totals as JSON, for the diff's JSON form."""
    if model is None:
        return None
    return {f.name: f.totals.to_json() for f in model.functions}
