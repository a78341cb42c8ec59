"""Before lowering: the module as jitflow builds it (PrimFuncs exported under their names) and the
checks that catch what would fail later, or worse, run wrongly."""
from __future__ import annotations

from typing import Any, Iterator

from ..errors import ScheduleError


def is_relax(mod: Any) -> bool:
    """Whether the module has Relax functions (it then builds into a VM executable)."""
    import tvm

    return any(isinstance(f, tvm.relax.Function) for f in mod.functions.values())


def prepare(mod: Any):
    """PrimFunc or IRModule -> a new IRModule whose PrimFuncs export under their names in the module.

    The caller's module is copied, never changed: later changes to it (mod["main"] = other) do not
    reach the copy, and the copy's changes do not reach the caller.
    """
    import tvm

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    else:
        mod = mod.clone()
    updates = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
            if symbol is not None and str(symbol) != gvar.name_hint:
                updates[gvar] = func.with_attr("global_symbol", gvar.name_hint)
    for gvar, func in updates.items():
        mod[gvar] = func
    return mod


def _children(stmt: Any) -> Iterator[Any]:
    for name in ("seq",):
        for s in getattr(stmt, name, None) or ():
            yield s
    for name in ("block", "body", "then_case", "else_case", "init"):
        child = getattr(stmt, name, None)
        if child is not None and not isinstance(child, (list, tuple)) and hasattr(child, "span"):
            yield child


def _unbound_writes(stmt: Any, bound: bool, found: list[str]) -> None:
    import tvm

    tirx = tvm.tirx
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.THREAD_BINDING:
        bound = True
    elif isinstance(stmt, tirx.AttrStmt) and stmt.attr_key in ("thread_extent", "virtual_thread"):
        bound = True
    elif isinstance(stmt, tirx.BufferStore) and not bound and stmt.buffer.scope() == "global":
        found.append(stmt.buffer.name)
    for child in _children(stmt):
        _unbound_writes(child, bound, found)


def check_thread_binding(mod: Any) -> None:
    """Refuse a CUDA module that writes global memory outside any GPU thread (it would crash at run time)."""
    import tvm

    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        found: list[str] = []
        _unbound_writes(func.body, False, found)
        if found:
            names = ", ".join(sorted(set(found)))
            raise ScheduleError(
                f"function {gvar.name_hint!r}: loops writing {names} are not bound to GPU threads; "
                "bind them with sch.bind(loop, 'blockIdx.x') / sch.bind(loop, 'threadIdx.x') "
                "(or build for the 'c' target)")
