"""Tell clang what TVM tells LLVM: the buffers of a TIR function that promises so do not alias.

TVM's host code reads each buffer's data pointer out of the packed arguments into a local, so
clang must assume that a store to one buffer may change any other: it keeps running sums in
memory and cannot vectorize (a 1x1 convolution of mobilenet_v2 ran 7x slower than with the
promise). `restrict` on those locals changes nothing; on a function's parameters it does.

TVM's LLVM host compiles the part of a packed function after its argument checks (the
`compute_scope` that MakePackedAPI marks) as a function of its own, whose pointer arguments are
`noalias` when the PrimFunc has `tirx.noalias` (TVM's te, FuseTIR and legalized Relax operators
set it; a TVMScript function has it only when written). This module does the same for the C host:

- `split_compute(mod)`, on the host IR just before TVM prints it: each function with the promise
  whose compute scope reads or writes memory on the CPU becomes its packed entry (the checks, as
  before) calling `jitflow_compute_<name>` (formats/compute_functions.py), which takes every
  variable the scope uses from the entry, a buffer as its data pointer. An error code it returns
  is returned by the entry. Functions without the promise, and the host side of CUDA modules
  (which only launches kernels), keep their code.
- then noalias_c.py, on the printed C: the compute functions' pointer parameters made `restrict`
  (but `void*` handles), hidden from the library's exports and never inlined (each is compiled
  once, as TVM's LLVM host does), each moved to just after its entry.

What the promise covers is what TVM's covers: two arguments of one call are different memory; a
tensor passed twice where one of them is written breaks it, as it does in TVM's own LLVM build.
"""
from __future__ import annotations

from typing import Any

from ...errors import HostCodeError
from ...formats.compute_functions import PREFIX, compute_name
from .legalize import function_name

NOALIAS = "tirx.noalias"
_SCOPE = "compute_scope"


def _promises(func: Any) -> bool:
    value = func.attrs.get(NOALIAS) if func.attrs is not None else None
    return value is not None and bool(getattr(value, "value", value))


def _first(body: Any, kinds: Any, wanted: Any = None) -> Any:
    """The first node (pre-order) of the given types that `wanted` accepts, or None; expressions are
    not looked into unless asked for."""
    import tvm
    import tvm_ffi

    def visit(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if wanted is None or wanted(node) else None

    skip = [] if tvm.ir.expr.TensorLoad in kinds else [(tvm.ir.expr.Expr, lambda _: tvm_ffi.WalkResult.SKIP)]
    found = tvm_ffi.structural_walk(body, [(kinds, visit), *skip], order="pre")
    return found.value if found is not None else None


def _compute_scope(func: Any) -> Any:
    """The function's compute scope (MakePackedAPI's), if it reads or writes memory on the CPU."""
    import tvm

    scope = _first(func.body, (tvm.tirx.AttrStmt,), lambda n: n.attr_key == _SCOPE)
    if scope is None or _first(scope.body, (tvm.tirx.BufferStore, tvm.ir.expr.TensorLoad)) is None:
        return None
    return scope


def _compute_function(body: Any) -> tuple[Any, list[Any]]:
    """The compute function of a scope's body, and the entry's values of its parameters."""
    import tvm

    tirx = tvm.tirx
    pointers, declarations, args = [], [], []
    for var in tirx.analysis.undefined_vars(body, []):
        if tirx.is_buffer_var(var):
            pointer = tvm.ir.expr.Var(f"{var.name}_data", tirx.buffer_data_pointer_type(var))
            pointers.append(pointer)
            declarations.append(tirx.DeclBuffer(var, data=pointer))
            args.append(tirx.buffer_data(var))
    inner = tirx.SeqStmt([*declarations, body, tirx.Return(tirx.IntImm("int32", 0))])
    others = [v for v in tirx.analysis.undefined_vars(inner, pointers) if not tirx.is_buffer_var(v)]
    func = tirx.PrimFunc([*pointers, *others], inner, ret_type=tvm.ir.PrimType("int32"))
    return func, [*args, *others]


def _calling(callee: Any, args: list[Any]) -> Any:
    """The entry's statement in place of the scope: call the compute function, return its error."""
    import tvm

    tirx = tvm.tirx
    code = tvm.ir.expr.Var("compute_status", "int32")
    failed = tvm.ir.prim.expr.NE(code, tirx.IntImm("int32", 0))
    return tirx.SeqStmt([tirx.Bind(code, tvm.ir.Call(callee, args, ret_ty="int32")),
                         tirx.IfThenElse(failed, tirx.Return(code), None)])


def _taken(mod: Any) -> list[str]:
    """The TIR functions whose C name (global symbol, else the module's name for it) is one of the
    compute functions' names."""
    out = []
    for gvar, func in mod.functions.items():
        symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
        if (gvar.name_hint if symbol is None else str(symbol)).startswith(PREFIX):
            out.append(function_name(gvar, func))
    return sorted(out)


def split_compute(mod: Any) -> Any:
    """The host IRModule with the compute scope of each function that promises no aliasing in a
    function of its own (the same object if nothing changes); see the module's docstring."""
    import tvm

    taken = _taken(mod)
    if taken:
        raise HostCodeError(f"a function whose C name starts with {PREFIX} (the C host's own names)", taken)
    updates, added = {}, {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc) or not _promises(func):
            continue
        scope = _compute_scope(func)
        if scope is None:
            continue
        inner, args = _compute_function(scope.body)
        callee = tvm.ir.GlobalVar(compute_name(function_name(gvar, func)))
        call = _calling(callee, args)
        body = _replace(func.body, scope, call)
        updates[gvar], added[callee] = func.with_body(body), inner
    if not updates:
        return mod
    out = mod.clone()
    for gvar, func in updates.items():
        out.update_func(gvar, func)
    for gvar, func in added.items():
        out[gvar] = func
    return out


def _replace(body: Any, old: Any, new: Any) -> Any:
    import tvm
    import tvm_ffi

    def attr(node: Any, mutator: Any) -> Any:
        return new if node.same_as(old) else mutator.default_mutate(node)

    return tvm_ffi.structural_mutate(body, [(tvm.tirx.AttrStmt, attr)])
