"""The caller's module as jitflow takes it: a copy whose PrimFuncs export under their names in the
module, and whether it is a Relax model. jitflow.compile does this before the key is taken, on a
cache hit too, so it needs nothing of the builder."""
from __future__ import annotations

from typing import Any


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
