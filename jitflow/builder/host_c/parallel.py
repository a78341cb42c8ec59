"""Parallel loops of the host IR on TVM's thread pool, as TVM's LLVM host runs them.

TVM's C printer prints a `T.parallel` loop as a plain `for`, so a C-host kernel runs on one
thread. TVM's LLVM host (CodeGenCPU) outlines it instead, and this pass does the same on the host
IR just before it prints (after outline.py; the C glue is parallel_c.py's):

- A parallel loop outside any launch, and the body of a `pragma_parallel_launch_point` attribute,
  become a launch `f_k` (formats/parallel_functions.py): the statement moves into a body function
  `jitflow_parallel_f_k(task_id, num_task, penv, values...)` taking the values it uses (a buffer as
  its data pointer), and in its place the host function calls `jitflow_launch_f_k(values...)`,
  which hands the body to TVMBackendParallelLaunch (the pool runs it once per task) and returns
  its error code: a nonzero code is returned at once, as after any failed call.
- Inside a launch, a parallel loop runs its task's share of the iterations: task t of n owns the
  chunk [t * c, (t + 1) * c) of the extent, c = ceil(extent / n), cut at the extent, as in LLVM.
  A launch that is one parallel loop (the loop runs once per task) claims its chunks in pieces
  (`jitflow_claim_*` / `jitflow_claim_end_*`): a task runs its own chunk's pieces, then takes pieces
  of chunks whose owners are behind, so a task that starts late or runs on a busy core does not hold
  the others up. Inside a launch point each task runs its chunk whole (`jitflow_chunk_begin_*` /
  `jitflow_chunk_end_*`), as LLVM's host does: a loop there may run again (inside a serial loop), and
  a loop may read what the same task's chunk of the loop before it wrote. After a
  `pragma_parallel_stride_pattern` attribute a loop takes every n-th iteration from t instead (for the
  rest of the launch, as in LLVM), counted in int64 where the loop is narrower, so its last step
  cannot overflow.
- `pragma_parallel_barrier_when_finish` calls `jitflow_barrier` after its statement: every task
  waits there for the others, and if a task has failed (and so never arrives) the waiting ones
  return at once, so a failing assert before a barrier is an error, not a hang.
- What LLVM's host refuses is a HostCodeError with its reason: a parallel loop inside another, one
  that does not start at 0 or steps by more than 1, a barrier inside a parallel loop or outside a
  launch, a stride pattern outside a launch, a launch point without a parallel loop.

A body's pointer parameters are `restrict` where its host function's are (outline_c.py writes the
qualifier: the function promises no aliasing, as `tirx.noalias` tells LLVM).
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable

from ...errors import HostCodeError
from ...formats.compute_functions import entry_of
from ...formats.parallel_functions import BODY, LAUNCH, LEADING, launch_name
from .lanes import dtype_of
from .legalize import function_name
from .outline import outlined, promises_no_aliasing, with_functions
from .parallel_c import BARRIER_HELPER, CHUNK_BEGIN, CHUNK_END, CLAIM, CLAIM_END, HELPER_TYPES

LAUNCH_POINT = "pragma_parallel_launch_point"
STRIDE_PATTERN = "pragma_parallel_stride_pattern"
BARRIER = "pragma_parallel_barrier_when_finish"
_KEYS = (LAUNCH_POINT, STRIDE_PATTERN, BARRIER)
_CANONICAL = ("TVM's thread pool runs loops from 0 in steps of 1, and TVM's LLVM host refuses others too: "
              "start the loop at 0 (TVM's lowering does for loops it makes) and step by 1.")


class _Env:
    """A launch's parallel environment (LLVM's ParallelEnv): the task's id and the task count, the
    pool's group env, and what the pass has seen so far inside it."""

    def __init__(self, claims: bool) -> None:
        import tvm

        task_id, num_task, penv = LEADING
        self.task_id = tvm.ir.expr.Var(task_id, "int32")
        self.num_task = tvm.ir.expr.Var(num_task, "int32")
        self.penv = tvm.ir.expr.Var(penv, "handle")
        self.stride = False       # a stride pattern attribute was seen: later loops stride
        self.in_loop = False
        self.loops = 0
        self.claimable = claims   # the launch is one parallel loop: its pieces are claimed
        self.claims = 0           # loops whose pieces are claimed, each numbered in the launch


class _Refused(Exception):
    """What LLVM's host refuses too: the construct and what to do, raised through TVM's mutator and
    re-raised as a HostCodeError."""

    def __init__(self, construct: str, advice: str) -> None:
        super().__init__(construct)
        self.construct, self.advice = construct, advice


class _Function:
    """The launches of one TIR function (its entry or its compute part, and the bodies it launches)."""

    def __init__(self, name: str, restrict: bool, counter: Callable[[], int]) -> None:
        import tvm

        self.tvm, self.name, self.restrict, self.counter = tvm, name, restrict, counter
        self.bodies: dict[str, Any] = {}
        self.refused: list[_Refused] = []

    def rewrite(self, stmt: Any, env: _Env | None) -> Any:
        """`stmt` with its parallel loops and pragmas done, inside `env` (None: outside any launch).
        A refusal raised in a callback is raised as itself (across TVM's FFI it becomes a RuntimeError)."""
        import tvm_ffi

        tvm = self.tvm

        def guarded(callback: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
            def run(node: Any, mutator: Any) -> Any:
                try:
                    return callback(node, mutator)
                except _Refused as exc:
                    self.refused.append(exc)
                    raise
            return run

        handlers = [(tvm.tirx.For, guarded(lambda node, m: self._for(node, m, env))),
                    (tvm.tirx.AttrStmt, guarded(lambda node, m: self._attr(node, m, env))),
                    (tvm.ir.expr.Expr, lambda node, _m: node)]          # expressions hold no statement
        try:
            return tvm_ffi.structural_mutate(stmt, handlers)
        except Exception:
            if self.refused:
                raise self.refused[0] from None
            raise

    def _for(self, node: Any, mutator: Any, env: _Env | None) -> Any:
        tvm = self.tvm
        if node.kind != tvm.tirx.ForKind.PARALLEL:
            return mutator.default_mutate(node)
        if not _is_zero(node.min):
            raise _Refused(f"a parallel loop that starts at {node.min}, not 0", _CANONICAL)
        if node.step is not None and not _is_one(node.step):
            raise _Refused(f"a parallel loop with step {node.step}", _CANONICAL)
        if env is None:
            return self._launch(node, claims=True)
        if env.in_loop:
            raise _Refused(f"a parallel loop over {node.loop_var} inside another parallel loop",
                           "TVM's thread pool does not nest launches, and TVM's LLVM host refuses it too: fuse "
                           "the two loops into one, or make the inner one serial.")
        env.in_loop = True
        body = mutator.mutate(node.body)
        env.in_loop = False
        env.loops += 1
        return self._share(node, body, env)

    def _attr(self, node: Any, mutator: Any, env: _Env | None) -> Any:
        tvm = self.tvm
        key = node.attr_key
        if key == LAUNCH_POINT:
            return self._launch(node.body, claims=False)
        if key == STRIDE_PATTERN:
            if env is None:
                raise _Refused(f"{STRIDE_PATTERN} outside a parallel launch point",
                               f"It applies only inside {LAUNCH_POINT}, and TVM's LLVM host refuses it too: "
                               "move it inside one, or remove it.")
            env.stride = True
            return mutator.mutate(node.body)
        if key == BARRIER:
            if env is None:
                raise _Refused(f"{BARRIER} outside a parallel launch point",
                               f"TVM's LLVM host refuses it too: put it inside {LAUNCH_POINT}, around the "
                               "parallel loop the other tasks must finish first.")
            if env.in_loop:
                raise _Refused(f"{BARRIER} inside a parallel loop",
                               "Tasks may do different work there, and TVM's LLVM host refuses it too: put it "
                               f"between the parallel loop and {LAUNCH_POINT}.")
            body = mutator.mutate(node.body)
            barrier = tvm.tirx.call_extern("int32", BARRIER_HELPER, env.num_task, env.penv)
            failed = tvm.ir.prim.expr.NE(barrier, tvm.tirx.IntImm("int32", 0))
            # a task failed: this one stops too (the launch returns the failed task's error)
            return tvm.tirx.SeqStmt([body, tvm.tirx.IfThenElse(failed, tvm.tirx.Return(tvm.tirx.IntImm("int32", -1)),
                                                               None)])
        return mutator.default_mutate(node)

    def _launch(self, stmt: Any, claims: bool) -> Any:
        """`stmt` outlined into a body run by the pool, and the call that launches it (`claims`: its
        loop's pieces are claimed)."""
        tvm = self.tvm
        tirx = tvm.tirx
        name = launch_name(self.name, self.counter())
        env = _Env(claims)
        inner = self.rewrite(stmt, env)
        if env.loops == 0:
            raise _Refused(f"{LAUNCH_POINT} without a parallel loop inside it",
                           "TVM's LLVM host refuses it too: put the parallel loops inside it, or remove it.")
        leading = [env.task_id, env.num_task, env.penv]
        body, values = outlined(inner, leading, [tirx.Return(tirx.IntImm("int32", 0))])
        self.bodies[BODY + name] = tirx.PrimFunc([*leading, *(param for _, param, _ in values)], body,
                                                 ret_type=tvm.ir.PrimType("int32"))
        status = tvm.ir.expr.Var("parallel_status", "int32")
        call = tirx.call_extern("int32", LAUNCH + name, *(arg for _, _, arg in values))
        failed = tvm.ir.prim.expr.NE(status, tirx.IntImm("int32", 0))
        return tirx.SeqStmt([tirx.Bind(status, call), tirx.IfThenElse(failed, tirx.Return(status), None)])

    def _share(self, node: Any, body: Any, env: _Env) -> Any:
        """The loop over this task's iterations: the pieces it claims, its chunk whole, or every
        num_task-th iteration from its id."""
        if env.stride:
            return self._stride(node, body, env)
        return self._claimed(node, body, env) if env.claimable else self._chunk(node, body, env)

    def _chunk(self, node: Any, body: Any, env: _Env) -> Any:
        """The loop over this task's chunk, whole."""
        tvm = self.tvm
        tirx, prim = tvm.tirx, tvm.ir.prim.expr
        dtype = str(dtype_of(node.extent))
        task, tasks = (v if dtype == "int32" else prim.Cast(dtype, v) for v in (env.task_id, env.num_task))
        helper = dtype if dtype in HELPER_TYPES else "int64"

        def bound(prefix: str) -> Any:
            args = [a if helper == dtype else prim.Cast(helper, a) for a in (node.extent, task, tasks)]
            value = tirx.call_pure_extern(helper, prefix + helper, *args)
            return value if helper == dtype else prim.Cast(dtype, value)

        begin, end = bound(CHUNK_BEGIN), bound(CHUNK_END)
        return tirx.For(node.loop_var, begin, prim.Sub(end, begin), tirx.ForKind.SERIAL, body)

    def _claimed(self, node: Any, body: Any, env: _Env) -> Any:
        """The loop over the pieces this task claims:

            claimed[0] = jitflow_claim_T(k, extent, task_id, num_task, penv, -1);
            while (claimed[0] >= 0) {
              begin = claimed[0];
              for (i = begin; i < jitflow_claim_end_T(extent, begin, num_task); ++i) body
              claimed[0] = jitflow_claim_T(k, extent, task_id, num_task, penv, begin);
            }
        """
        tvm = self.tvm
        tirx, prim = tvm.tirx, tvm.ir.prim.expr
        dtype = str(dtype_of(node.extent))
        helper = dtype if dtype in HELPER_TYPES else "int64"

        def typed(value: Any, to: str) -> Any:
            return value if str(dtype_of(value)) == to else prim.Cast(to, value)

        extent, task, tasks = (typed(v, helper) for v in (node.extent, env.task_id, env.num_task))
        loop = tirx.IntImm("int32", env.claims)
        env.claims += 1
        claimed = tirx.decl_buffer((1,), helper, f"{node.loop_var.name}_claimed")
        begin = tvm.ir.expr.Var(f"{node.loop_var.name}_begin", helper)

        def claim(prev: Any) -> Any:
            call = tirx.call_extern(helper, CLAIM + helper, loop, extent, task, tasks, env.penv, prev)
            return tirx.BufferStore(claimed, call, [tirx.IntImm("int32", 0)])

        end = tirx.call_pure_extern(helper, CLAIM_END + helper, extent, begin, tasks)
        start = typed(begin, dtype)
        piece = tirx.For(node.loop_var, start, prim.Sub(typed(end, dtype), start), tirx.ForKind.SERIAL, body)
        current = tirx.BufferLoad(claimed, [tirx.IntImm("int32", 0)])
        again = tirx.SeqStmt([tirx.Bind(begin, current), piece, claim(begin)])
        return tirx.SeqStmt([tirx.AllocBuffer(claimed), claim(tirx.IntImm(helper, -1)),
                             tirx.While(prim.GE(current, tirx.IntImm(helper, 0)), again)])

    def _stride(self, node: Any, body: Any, env: _Env) -> Any:
        """Every num_task-th iteration from the task's id. A loop narrower than int64 counts in int64
        (its variable bound to the count, cast back), so the last step, past the extent, cannot
        overflow as `i += num_task` in int32 would at its largest extents (an int64 loop that near
        its largest extent would never end anyway)."""
        tvm = self.tvm
        tirx, prim = tvm.tirx, tvm.ir.prim.expr
        dtype = str(dtype_of(node.extent))
        task, tasks = (v if dtype == "int32" else prim.Cast(dtype, v) for v in (env.task_id, env.num_task))
        if dtype in ("int64", "uint64"):
            return tirx.For(node.loop_var, task, prim.Sub(node.extent, task), tirx.ForKind.SERIAL, body, step=tasks)
        counter = tvm.ir.expr.Var(node.loop_var.name, "int64")
        task, tasks, extent = (prim.Cast("int64", v) for v in (env.task_id, env.num_task, node.extent))
        inner = tirx.SeqStmt([tirx.Bind(node.loop_var, prim.Cast(dtype, counter)), body])
        return tirx.For(counter, task, prim.Sub(extent, task), tirx.ForKind.SERIAL, inner, step=tasks)


def _is_zero(value: Any) -> bool:
    return getattr(value, "value", None) == 0


def _is_one(value: Any) -> bool:
    return getattr(value, "value", None) == 1


def has_parallel(func: Any) -> bool:
    """Whether `func` holds a parallel loop or a parallel pragma (one walk that stops at the first)."""
    import tvm
    import tvm_ffi

    def loop(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if node.kind == tvm.tirx.ForKind.PARALLEL else None

    def attr(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if node.attr_key in _KEYS else None

    skip = (tvm.ir.expr.Expr, lambda _: tvm_ffi.WalkResult.SKIP)
    return tvm_ffi.structural_walk(func.body, [(tvm.tirx.For, loop), (tvm.tirx.AttrStmt, attr), skip],
                                   order="pre") is not None


def parallelize_module(mod: Any, restrict: AbstractSet[str]) -> tuple[Any, frozenset[str]]:
    """(The host IRModule with its parallel loops launched on TVM's pool (the module's docstring): the
    same object if it has none; the C names of the bodies whose pointers are `restrict`: those of
    functions that promise no aliasing or are named in `restrict`, outline.py's compute functions)."""
    import tvm

    functions = sorted(((function_name(g, f), g, f) for g, f in mod.functions.items()
                        if isinstance(f, tvm.tirx.PrimFunc)), key=lambda item: item[0])
    taken = [name for name, _, _ in functions if name.startswith((BODY, LAUNCH))]
    if taken:
        raise HostCodeError(f"a function whose C name starts with {BODY} or {LAUNCH} (the C host's own names)",
                            taken)
    counters: dict[str, int] = {}
    updates, added, restricted = {}, {}, set()
    for name, gvar, func in functions:
        if not has_parallel(func):
            continue
        tir = entry_of(name) or name

        def counter(tir: str = tir) -> int:
            counters[tir] = counters.get(tir, -1) + 1
            return counters[tir]

        launches = _Function(tir, promises_no_aliasing(func) or name in restrict, counter)
        try:
            body = launches.rewrite(func.body, None)
        except _Refused as exc:
            raise HostCodeError(exc.construct, [tir], advice=exc.advice) from None
        if str(func.ret_type) != "int32" and launches.bodies:
            raise HostCodeError("a parallel loop in a function that returns no error code", [tir],
                                advice="A launch returns its error code to its function: make the loop serial, "
                                       "or move it into a function TVM calls (those return int32).")
        updates[gvar] = func.with_body(body)
        for body_name, body_func in launches.bodies.items():
            added[tvm.ir.GlobalVar(body_name)] = body_func
            if launches.restrict:
                restricted.add(body_name)
    if not updates:
        return mod, frozenset()
    return with_functions(mod, updates, added), frozenset(restricted)
