"""What changed in a model's memory plan between two builds, read as a plan comparison: per call of
each VM function its peak, its storage (blocks matched by the tensors they hold, not by position),
a CUDA graph's cached storage, workspaces, copies, launches and the kernels launched; and the
constants uploaded at start-up."""
from __future__ import annotations

from typing import Any

from .memory_plan import ModelMemory, ModelStorage, VMFunction
from .memory_plan_text import peak_text
from .memory_plan_text import size_or_depends as _size

#: One model fact that differs: what (e.g. "main storage per call"), its text in a and in b ("-": absent).
ModelChange = tuple[str, str, str]
ABSENT = "-"


def _count(n: int | None, size: Any = None, with_size: bool = True) -> str:
    if n is None:
        return "?"
    return f"{n}, {_size(size)}" if with_size and n else str(n)


def _holds(s: ModelStorage) -> str:
    return ", ".join(str(t) for t in s.tensors) or "no tensors"


def _storage(s: ModelStorage) -> str:
    return f"{_size(s.size)} {s.device}" + (" cached" if s.cached else "") + (" (output)" if s.holds_output else "")


def match_blocks(a: tuple[ModelStorage, ...], b: tuple[ModelStorage, ...]) -> list[tuple[ModelStorage | None,
                                                                                         ModelStorage | None]]:
    """Pairs of blocks that hold the same tensors (in a, in b; None where a block has no partner):
    first those holding exactly the same list, then those sharing the most tensors, in order."""
    left, right = list(a), list(b)
    pairs: list[tuple[ModelStorage | None, ModelStorage | None]] = []
    for x in list(left):
        same = [y for y in right if [str(t) for t in y.tensors] == [str(t) for t in x.tensors]]
        y = max(same, key=lambda y: (y.holds_output == x.holds_output) + (y.size == x.size), default=None)
        if y is not None:
            pairs.append((x, y))
            left.remove(x)
            right.remove(y)
    for x in list(left):
        shared = [(len({str(t) for t in x.tensors} & {str(t) for t in y.tensors}), -i) for i, y in enumerate(right)]
        best = max(shared, default=(0, 0))
        if best[0]:
            y = right[-best[1]]
            pairs.append((x, y))
            left.remove(x)
            right.remove(y)
    return pairs + [(x, None) for x in left] + [(None, y) for y in right]


def _facts(f: VMFunction) -> dict[str, str]:
    t = f.totals
    assert t is not None
    facts = {
        "peak per call": peak_text(f).removeprefix("peak "),
        "storage per call": _count(t.storages, t.storage_bytes),
        "cached storage (allocated once)": _count(t.cached_storages, t.cached_bytes),
        "workspaces per call": "?" if f.workspaces is None else _count(t.workspaces, t.workspace_bytes),
        "copies per call": _count(t.copies, t.copy_bytes),
        "launches per call": _count(t.launches, with_size=False) + (f" ({t.replayed} replayed)" if t.replayed else ""),
        "calls": ", ".join(f.calls) or "none",
    }
    if f.launches is not None:
        facts["kernels launched"] = ", ".join(x.kernel + (" (replayed)" if x.replayed else "")
                                              for x in f.launches) or "none"
    return facts


def _block_changes(name: str, fa: VMFunction, fb: VMFunction) -> list[ModelChange]:
    out = []
    for x, y in match_blocks(fa.storages, fb.storages):
        what = f"{name} storage holding {_holds(x if x is not None else y)}"    # type: ignore[arg-type]
        if x is not None and y is not None and _holds(x) != _holds(y):
            what = f"{name} storage holding {_holds(x)} | {_holds(y)}"
        va, vb = (ABSENT if x is None else _storage(x)), (ABSENT if y is None else _storage(y))
        if va != vb or (x is not None and y is not None and _holds(x) != _holds(y)):
            out.append((what, va, vb))
    return out


def model_changes(a: ModelMemory | None, b: ModelMemory | None) -> list[ModelChange]:
    """The differences between two memory plans (none when neither build is a Relax model)."""
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
            if xa.get(what, ABSENT) != xb.get(what, ABSENT):
                out.append((f"{name} {what}", xa.get(what, ABSENT), xb.get(what, ABSENT)))
        out += _block_changes(name, fa[name], fb[name])
    return out


def per_call(model: ModelMemory | None) -> dict[str, Any] | None:
    """Each VM function's per-call totals and peak as JSON, for the diff's JSON form."""
    if model is None:
        return None
    return {f.name: {**f.totals.to_json(), "peak_bytes": None if f.peak is None else f.peak.value,  # type: ignore
                     "peak": None if f.peak is None else f.peak.text} for f in model.functions}
