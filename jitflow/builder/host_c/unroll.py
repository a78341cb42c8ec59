"""Small innermost loops unrolled whole in the host IR, where TVM's LLVM host (-O3) would and clang
at -O2 (the C host's level, for build time) does not.

LLVM unrolls a loop whole when its unrolled cost is under 300 at -O3 and 150 at -O2. Two shapes of
MetaSchedule candidates fall between, and run several times slower rolled:

- an innermost loop whose stores stay in place while its enclosing loop runs, a long one (the tile of
  a matmul's accumulators inside its reduction): unrolled, each accumulator stays in a register
  through the enclosing loop (a 512^3 matmul candidate ran 4.4x LLVM's time rolled);
- an innermost reduction (stores in place across its own steps): unrolled, the loop around it is the
  innermost and clang vectorizes it (a 128^3 matmul candidate: 4.6x), or what it computes does not
  change in that loop and clang computes it once (a softmax candidate: 5.2x).

Raising clang's threshold for every loop instead made dlight's kernels up to 1.2x slower, so only
these loops are unrolled: serial, a constant trip count from MIN_STEPS to MAX_STEPS, made of updates
(`B[i] = B[i] + x`) and binding statements only, at most MAX_NODES IR nodes once unrolled, a vector
operation counted as the 4-lane registers it fills (a row sum's 64 steps of 32-lane adds ran 1.2x to
1.7x LLVM's time unrolled, 1.2x rolled; a matmul's 32 steps of 8-lane updates 1.36x unrolled, 1.75x to
1.85x rolled). Not a loop with a let expression: its copies would share the let's variable, and TVM's
C printer prints a variable bound twice to equal values once, which is wrong where a store comes
between. Loops TVM left marked unrolled (its LLVM host ignores the mark) are left as they are. TVM's
ConvertSSA gives each copy's bindings their own variables: C refuses a name declared twice in a block.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

from .vector_ir import lanes_of

#: the longest loop unrolled (steps)
MAX_STEPS = 64
#: the shortest: clang unrolls shorter loops whole itself, later in its pipeline, and unrolled
#: earlier a 2-step loop made a 128^3 matmul candidate 2.5x slower (0.76x LLVM's time -> 1.89x)
MIN_STEPS = 8
#: the most statements and operations a loop may have once unrolled (steps times its body's)
MAX_NODES = 1_200
#: what a call counts for: most are math that inlines tens of instructions (64 `expf` calls of a
#: softmax candidate's reduction, unrolled, took clang 2.3 s where TVM's whole build took 0.12 s)
CALL_NODES = 40


class _Uses:
    """Which variables an expression depends on, through the function's bindings (host IR is SSA)."""

    def __init__(self, body: Any) -> None:
        import tvm

        self.tvm, self._body = tvm, body
        self._memo: dict[tuple[Any, Any], bool] = {}

    @cached_property
    def bound(self) -> dict[Any, Any]:
        """Each bound variable's value: read on the first question (most functions have no loop to ask about)."""
        import tvm_ffi

        out: dict[Any, Any] = {}
        tvm_ffi.structural_walk(self._body, [(self.tvm.tirx.Bind, lambda node: out.__setitem__(node.var, node.value))],
                                order="pre")
        return out

    def depends(self, expr: Any, var: Any) -> bool:
        import tvm_ffi

        def visit(node: Any) -> Any:
            if node.same_as(var) or (node in self.bound and self._bound_depends(node, var)):
                return tvm_ffi.VisitInterrupt(node)
            return None

        return tvm_ffi.structural_walk(expr, [(self.tvm.ir.expr.Var, visit)], order="pre") is not None

    def _bound_depends(self, bound: Any, var: Any) -> bool:
        key = (bound, var)
        if key not in self._memo:
            self._memo[key] = False       # a cycle cannot happen in SSA; stop one anyway
            self._memo[key] = self.depends(self.bound[bound], var)
        return self._memo[key]


def _candidate(loop: Any, outer: Any | None, uses: _Uses) -> bool:
    """Whether `loop` (innermost in `outer`, the loop around it or None) is one of the two shapes."""
    import tvm
    import tvm_ffi

    tirx = tvm.tirx
    if loop.kind != tirx.ForKind.SERIAL or not isinstance(loop.extent, tvm.ir.prim.expr.IntImm) \
            or not MIN_STEPS <= loop.extent.value <= MAX_STEPS:
        return False
    stores: list[Any] = []
    nodes = [0]
    other = [False]
    prim = tvm.ir.prim.expr
    leaves = (prim.IntImm, prim.FloatImm, tvm.ir.expr.Var)

    def visit(node: Any) -> Any:
        if isinstance(node, tvm.ir.Call):
            nodes[0] += CALL_NODES
        elif isinstance(node, tirx.Stmt) or (isinstance(node, tvm.ir.expr.ExprWithOp) and not isinstance(node, leaves)):
            nodes[0] += max(1, lanes_of(node) // 4)   # statements and operations (a wide vector's as the
            #                                           SSE registers it fills), not constants or names
        if isinstance(node, tirx.BufferStore):
            stores.append(node)
        elif isinstance(node, prim.Let) or \
                (isinstance(node, tirx.Stmt) and not isinstance(node, (tirx.Bind, tirx.SeqStmt))):
            other[0] = True
            return tvm_ffi.VisitInterrupt(node)
        return None

    tvm_ffi.structural_walk(loop.body, visit, order="pre")
    if other[0] or not stores or nodes[0] * loop.extent.value > MAX_NODES or not all(map(_updates, stores)):
        return False

    def in_place(var: Any) -> bool:
        return all(not any(uses.depends(i, var) for i in store.indices) for store in stores)

    return in_place(loop.loop_var) or (_long(outer) and in_place(outer.loop_var))


def _updates(store: Any) -> bool:
    """Whether a store updates what is there (`B[i] = B[i] + x`, `max(B[i], x)`): an accumulator. A
    temporary of each step of an outer loop (a row's exp in a softmax) gains nothing unrolled."""
    import tvm
    import tvm_ffi

    def same_place(node: Any) -> Any:
        if node.source.same_as(store.buffer) and tvm_ffi.structural_equal(list(node.indices), list(store.indices)):
            return tvm_ffi.VisitInterrupt(node)
        return None

    return tvm_ffi.structural_walk(store.value, [(tvm.ir.expr.TensorLoad, same_place)], order="pre") is not None


def _long(loop: Any | None) -> bool:
    """Whether a loop runs long enough for values kept in registers across it to pay: a 3-step one
    around a conv2d's tile of 16 accumulators made that candidate 1.5x slower once unrolled."""
    import tvm

    return loop is not None and isinstance(loop.extent, tvm.ir.prim.expr.IntImm) and loop.extent.value >= MIN_STEPS


def _copies(loop: Any) -> Any:
    """The loop's body once for each step, in order (by TVM's UnrollLoop, on the loop alone: loops TVM
    left marked unrolled elsewhere stay as they are; the copies' bindings are renamed by ConvertSSA)."""
    import tvm

    tirx = tvm.tirx
    marked = tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.UNROLLED, loop.body)
    alone = tvm.IRModule({"loop": tirx.PrimFunc([], marked)})
    return tirx.transform.UnrollLoop()(alone)["loop"].body


def unroll_function(func: Any) -> Any:
    """`func` with its qualifying loops unrolled, bindings not yet renamed (the same object if none is)."""
    import tvm
    import tvm_ffi

    tirx = tvm.tirx
    uses = _Uses(func.body)
    outer: list[Any] = []
    marked = [0]

    def has_loop(node: Any) -> bool:
        return tvm_ffi.structural_walk(node, [(tirx.For, lambda n: tvm_ffi.VisitInterrupt(n))],
                                       order="pre") is not None

    def loop(node: Any, mutator: Any) -> Any:
        if not has_loop(node.body):
            if _candidate(node, outer[-1] if outer else None, uses):
                marked[0] += 1
                return _copies(node)
            return node
        outer.append(node)
        try:
            return mutator.default_mutate(node)
        finally:
            outer.pop()

    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, loop)])
    return func.with_body(body) if marked[0] else func


def unroll_module(mod: Any) -> Any:
    """The host IRModule with its qualifying loops unrolled (the same object if none is)."""
    import tvm

    updates = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            new = unroll_function(func)
            if not new.same_as(func):
                updates[gvar] = new
    if not updates:
        return mod
    out = mod.clone()
    for gvar, func in updates.items():
        out.update_func(gvar, func)
    return tvm.tirx.transform.ConvertSSA()(out)
