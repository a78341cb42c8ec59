"""Each packed entry function's compute body as a C function of its own, as TVM's LLVM backend
outlines it: the entry checks and unpacks its arguments, then calls `<name>_compute_`.

TVM's MakePackedAPI marks where a function's own statements start (an AttrStmt "compute_scope"
named `<name>_compute_`); everything before it is argument checking, which is the same text for
every function of one signature. Outlined, the entry functions of a CPU kernel library depend
only on the signatures, so their object is compiled once per machine and signature
(toolchain/object_cache.py) instead of once per library: for a small kernel the checks are
about half of clang's work.

The compute function takes what its body uses from the entry (buffer pointers, shape and stride
values, the device id), in the order the entry defines them; it returns the body's own return
code (non-zero after an error it reported), which the entry returns when it is not zero.

Only bodies that call nothing of TVM's runtime are outlined (no packed calls, no workspaces): what
`inspect` reads from the host C (allocations, launches, copies, with the shape symbols the entry
defines) stays in the entry as printed. A library keeps
only the `__tvm_ffi_*` entry points exported (toolchain/link.py), so a compute function is
internal to its library.
"""
from __future__ import annotations

from typing import Any

SCOPE = "compute_scope"
SUFFIX = "_compute_"          # TVM's name for the outlined body of function f: f_compute_
_PACKED = 1                   # calling_conv of a packed (TVM FFI) function
#: call ops of TVM's runtime (and the C names of its API): a body that uses them stays in its entry
_RUNTIME_OPS = ("tirx.tvm_", "tirx.TVM")
_EXTERN_OPS = ("tirx.call_extern", "tirx.call_pure_extern")


def _scopes(body: Any) -> list[Any]:
    import tvm
    import tvm_ffi

    found: list[Any] = []

    def visit(node: Any) -> None:
        if node.attr_key == SCOPE:
            found.append(node)

    tvm_ffi.structural_walk(body, [(tvm.tirx.AttrStmt, visit)])
    return found


def _uses_runtime(stmt: Any) -> bool:
    """Whether `stmt` calls into TVM's runtime (a builtin op or a `TVM*` C function)."""
    import tvm
    import tvm_ffi

    def visit(node: Any) -> Any:
        name = getattr(node.op, "name", "")
        hit = name.startswith(_RUNTIME_OPS) or (
            name in _EXTERN_OPS and node.args and str(getattr(node.args[0], "value", "")).startswith("TVM"))
        return tvm_ffi.VisitInterrupt(node) if hit else None

    return tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, visit)], order="pre") is not None


def _definition_order(body: Any, scope: Any) -> dict[int, int]:
    """Each variable seen before `scope` in a pre-order walk of the entry (by its handle) -> its rank."""
    import tvm
    import tvm_ffi

    rank: dict[int, int] = {}

    def on_attr(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if node.same_as(scope) else None

    def on_var(node: Any) -> None:
        rank.setdefault(node.__chandle__(), len(rank))

    tvm_ffi.structural_walk(body, [(tvm.tirx.AttrStmt, on_attr), (tvm.ir.expr.Var, on_var)], order="pre")
    return rank


def _outline(func: Any, scope: Any, name: str) -> tuple[Any, Any]:
    """(the entry calling the compute function, the compute function) for one compute scope."""
    import tvm
    import tvm_ffi
    from tvm.ir.prim.expr import NE, IntImm

    tirx = tvm.tirx
    rank = _definition_order(func.body, scope)
    found = list(tirx.analysis.undefined_vars(scope.body, []))
    order = {v.__chandle__(): n for n, v in enumerate(found)}
    used = sorted(found, key=lambda v: rank.get(v.__chandle__(), len(rank) + order[v.__chandle__()]))
    params, decls = [], []
    for var in used:
        if isinstance(var.ty, tirx.BufferType):     # the body reads the buffer: pass its data pointer
            data = tvm.ir.expr.Var(var.name, tvm.ir.PointerType(tvm.ir.PrimType(str(var.dtype))))
            params.append(data)
            decls.append(tirx.DeclBuffer(var, data=data))
        else:
            params.append(var)
    attrs = {"global_symbol": name, "calling_conv": 0}
    if func.attrs is not None and "target" in func.attrs:
        attrs["target"] = func.attrs["target"]
    body = tirx.SeqStmt([*decls, scope.body, tirx.Return(IntImm("int32", 0))])
    compute = tirx.PrimFunc(params, body, ret_type=tvm.ir.PrimType("int32")).with_attr(attrs)
    code = tvm.ir.expr.Var("code", tvm.ir.PrimType("int32"))
    call = tirx.SeqStmt([tirx.Bind(code, tirx.call_extern("int32", name, *used)),
                         tirx.IfThenElse(NE(code, IntImm("int32", 0)), tirx.Return(code), None)])

    def replace(node: Any, mutator: Any) -> Any:
        return call if node.same_as(scope) else mutator.default_mutate(node)

    entry = func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.AttrStmt, replace)]))
    return entry, compute


def outline_module(mod: Any) -> Any:
    """The host IRModule with each packed function's compute body outlined (the same object if
    there is none to outline)."""
    import tvm

    taken = {g.name_hint for g in mod.functions} | {
        str(f.attrs["global_symbol"]) for f in mod.functions.values()
        if f.attrs is not None and "global_symbol" in f.attrs}
    added = []
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc) or func.attrs is None \
                or int(func.attrs.get("calling_conv", 0)) != _PACKED:
            continue
        scopes = _scopes(func.body)
        if len(scopes) != 1 or _uses_runtime(scopes[0].body):
            continue
        name = str(getattr(scopes[0].value, "value", ""))
        if not name.endswith(SUFFIX) or name in taken:
            continue
        taken.add(name)
        added.append((gvar, *_outline(func, scopes[0], name)))
    if not added:
        return mod
    out = mod.clone()
    for gvar, entry, compute in added:
        out.update_func(gvar, entry)
        out[tvm.ir.GlobalVar(compute.attrs["global_symbol"])] = compute
    return out
