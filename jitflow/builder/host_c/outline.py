"""A host function's work as a C function of its own, as TVM's LLVM host compiles it.

TVM's MakePackedAPI marks where a packed function's own statements start (the AttrStmt
"compute_scope"); everything before it checks and unpacks the arguments. TVM's LLVM host compiles
that scope as a function of its own, whose pointer arguments are `noalias` when the PrimFunc
promises so (`tirx.noalias`: TVM's te, FuseTIR and legalized Relax operators set it; a TVMScript
function has it only when written). TVM's C printer prints one function. This pass, on the host IR
just before it prints, does what the LLVM host does, for two reasons:

- aliasing: the printed C reads each buffer's data pointer into a local, so clang must assume that
  a store to one buffer may change any other; it keeps running sums in memory and vectorizes
  nothing. `restrict` on parameters tells clang what TVM tells LLVM (a 1x1 convolution of
  mobilenet_v2 ran 7x faster): outline_c.py writes it on the compute functions named here;
- the argument checks: they depend only on the signature (about half of clang's work for a small
  kernel), so with the work moved out, the entries of a CPU kernel library are the same text for
  every kernel of one signature and compile once per machine (split.split_entries,
  toolchain/zig_cc/object_cache.py).

Each function whose compute scope reads or writes memory on the CPU, and that promises no aliasing
or is asked for (`every_function`: CPU targets), becomes its entry calling
`jitflow_compute_<name>` (formats/compute_functions.py). The compute function takes every variable
the scope uses from the entry, a buffer as its data pointer, in the order the entry defines them
(so the call's text depends on the signature only); an error code it returns is returned by the
entry. Functions that only call others (the host side of CUDA modules, which launches kernels;
wrappers of packed calls) keep their code.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...errors import HostCodeError
from ...formats.compute_functions import PREFIX, compute_name
from .legalize import function_name

NOALIAS = "tirx.noalias"
_SCOPE = "compute_scope"


def promises_no_aliasing(func: Any) -> bool:
    """Whether the PrimFunc promises that its buffers are distinct memory (TVM's `tirx.noalias`)."""
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


def _definition_order(body: Any, scope: Any) -> dict[int, int]:
    """Each variable the entry names before `scope`, in a pre-order walk (by its handle) -> its rank."""
    import tvm
    import tvm_ffi

    rank: dict[int, int] = {}

    def on_attr(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if node.same_as(scope) else None

    def on_var(node: Any) -> None:
        rank.setdefault(node.__chandle__(), len(rank))

    tvm_ffi.structural_walk(body, [(tvm.tirx.AttrStmt, on_attr), (tvm.ir.expr.Var, on_var)], order="pre")
    return rank


def outlined(stmt: Any, defined: Sequence[Any] = (), end: Sequence[Any] = ()) -> tuple[Any, list[tuple[Any, Any, Any]]]:
    """`stmt` moved into a function of its own: (its body: each buffer `stmt` uses declared over a data
    pointer, then `stmt`, then `end`; for each value the body needs from where `stmt` was: the
    variable, the function's parameter, the caller's argument). Buffers come first, then the other
    variables, each in the order `stmt` first uses them; `defined` are variables the function
    defines itself (parameters of its own)."""
    import tvm

    tirx = tvm.tirx
    pointers, declarations, values = {}, [], []
    for var in tirx.analysis.undefined_vars(stmt, list(defined)):
        if tirx.is_buffer_var(var):
            pointer = tvm.ir.expr.Var(var.name, tirx.buffer_data_pointer_type(var))   # the name the body reads
            pointers[var.__chandle__()] = pointer
            declarations.append(tirx.DeclBuffer(var, data=pointer))
            values.append((var, pointer, tirx.buffer_data(var)))
    body = tirx.SeqStmt([*declarations, stmt, *end])
    values += [(v, v, v) for v in tirx.analysis.undefined_vars(body, [*defined, *pointers.values()])
               if not tirx.is_buffer_var(v)]
    return body, values


def _compute_function(entry_body: Any, scope: Any) -> tuple[Any, list[Any]]:
    """The compute function of a scope, and the entry's values of its parameters."""
    import tvm

    tirx = tvm.tirx
    inner, values = outlined(scope.body, end=[tirx.Return(tirx.IntImm("int32", 0))])
    rank = _definition_order(entry_body, scope)
    values.sort(key=lambda v: rank.get(v[0].__chandle__(), len(rank)))       # a stable sort
    func = tirx.PrimFunc([param for _, param, _ in values], inner, ret_type=tvm.ir.PrimType("int32"))
    return func, [arg for _, _, arg in values]


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


def outline_module(mod: Any, every_function: bool) -> tuple[Any, frozenset[str]]:
    """(The host IRModule with each function's work outlined, see the module's docstring: the same
    object if nothing changes; the C names of the compute functions whose buffers do not alias)."""
    import tvm

    taken = _taken(mod)
    if taken:
        raise HostCodeError(f"a function whose C name starts with {PREFIX} (the C host's own names)", taken)
    updates, added, restrict = {}, {}, set()
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        promised = promises_no_aliasing(func)
        scope = _compute_scope(func) if promised or every_function else None
        if scope is None:
            continue
        inner, args = _compute_function(func.body, scope)
        callee = tvm.ir.GlobalVar(compute_name(function_name(gvar, func)))
        updates[gvar], added[callee] = func.with_body(_replace(func.body, scope, _calling(callee, args))), inner
        if promised:
            restrict.add(callee.name_hint)
    if not updates:
        return mod, frozenset()
    return with_functions(mod, updates, added), frozenset(restrict)


def with_functions(mod: Any, updates: dict, added: dict) -> Any:
    """A copy of `mod` with the functions of `updates` replaced and those of `added` added."""
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
