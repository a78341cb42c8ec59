"""Before lowering: the checks that catch what would fail later, or worse, run wrongly (the module's
copy that jitflow builds is made by jitflow.compile: inputs/ir_module.py)."""
from __future__ import annotations

from typing import Any, Iterator

from ..errors import ScheduleError


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
