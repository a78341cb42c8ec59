"""Split vector statements that C cannot hold: into vectors C has, else one scalar statement per lane.

The prelude gives C vectors of 2 to 16 ints or floats (3 excepted), with element-wise arithmetic,
and mathlib.py's float math on them. TVM also emits vectors C has no type or operator for: more
than 16 lanes (MetaSchedule's 32- and 64-lane candidates, a vectorized bfloat16 loop), 3 lanes,
bool masks, other math calls on vectors, float `%`, vector Lets (TVM's floordiv and floormod of ints).

- A statement of more than 16 lanes is cut into pieces of 16 (the last one of what is left, in
  powers of two): each piece's value is computed into a vector variable first, then stored, so a
  store that reads the buffer it writes keeps its vector meaning. LLVM cuts such vectors into the
  CPU's registers the same way. A buffer whose elements are such vectors (a vectorized
  accumulator) becomes a buffer of their scalars, read and written with ramps (vector_buffers.py).
- A statement holding anything else C cannot express (or a piece that does) is rewritten lane by
  lane the same way, into scalars. clang's vectorizer is free to put the lanes back together.
"""
from __future__ import annotations

from typing import Any, Callable

from .prelude import CONVERT_PREFIX, VLOAD_PREFIX, has_c_type
from .vector_ir import CannotSplit, dtype_of, lanes_of, mutate, short

#: ops whose vector form the C printer writes with C operators that work on prelude vectors.
_VECTOR_OPS = {"tirx.bitwise_and", "tirx.bitwise_or", "tirx.bitwise_xor", "tirx.bitwise_not",
               "tirx.shift_left", "tirx.shift_right", "tirx.reinterpret"}
_EXTERN_OPS = {"tirx.call_extern", "tirx.call_pure_extern"}


class LaneSplitter:
    """Rewrites the vector statements of one function that C cannot express; keeps the split variables."""

    def __init__(self, vector_math: frozenset[str] = frozenset()) -> None:
        """vector_math: the TIR ops whose vector forms C can call (legalize.py's mathlib.py functions)."""
        import tvm

        prim = tvm.ir.prim.expr
        self.tvm = tvm
        self.binary = (prim.Add, prim.Sub, prim.Mul, prim.Div, prim.Mod, prim.FloorDiv, prim.FloorMod,
                       prim.Min, prim.Max, prim.EQ, prim.NE, prim.LT, prim.LE, prim.GT, prim.GE,
                       prim.And, prim.Or, prim.LShift, prim.RShift, prim.BitwiseAnd, prim.BitwiseOr,
                       prim.BitwiseXor)
        self.unary = (prim.Not, prim.BitwiseNot)
        self.split: dict[int, list[Any]] = {}   # a vector variable (by handle) -> its lanes as scalars
        self.pieces: dict[int, list[tuple[int, Any]]] = {}   # a wide vector variable -> its pieces
        self.vector_math = vector_math
        self.origins: dict[int, Any] = {}   # a variable this pass made (by handle) -> the construct it holds

    # -- which statements need splitting ---------------------------------------------------------

    def _bad_node(self, node: Any) -> bool:
        tvm = self.tvm
        dtype = dtype_of(node)
        if dtype is None:
            return False
        if node.__chandle__() in self.split and isinstance(node, tvm.ir.expr.Var):   # the handle first: cheaper
            return True
        if dtype.lanes == 1:
            return False
        if not has_c_type(dtype) or dtype.is_bool:
            return True
        if isinstance(node, tvm.ir.prim.expr.Mod) and dtype.is_float:
            return True                                # fmodf(float4, float4) is not C
        if isinstance(node, tvm.ir.prim.expr.Let):
            return True
        if isinstance(node, tvm.ir.Call):
            name = getattr(node.op, "name", "")
            if name in _EXTERN_OPS:
                return not str(node.args[0].value).startswith((CONVERT_PREFIX, VLOAD_PREFIX))
            if name in self.vector_math and dtype.type_code == 2 and dtype.bits in (16, 32):
                return False                           # mathlib.py's vector form (legalize.py)
            return name not in _VECTOR_OPS             # other math and intrinsics on vectors
        return False

    def needs_split(self, *exprs: Any) -> bool:
        """Whether any of the expressions holds a vector construct that C cannot express."""
        import tvm_ffi

        def visit(node: Any) -> Any:
            return tvm_ffi.VisitInterrupt(node) if self._bad_node(node) else None

        roots = [expr for expr in exprs if expr is not None]
        if not roots:
            return False
        return tvm_ffi.structural_walk(roots[0] if len(roots) == 1 else roots, visit, order="pre") is not None

    # -- one lane of an expression ---------------------------------------------------------------

    def scalar(self, expr: Any) -> Any:
        """A scalar expression with every vector construct inside it reduced to the lanes it reads."""
        shuffle = self.tvm.ir.prim.expr.Shuffle

        def on_shuffle(node: Any, mutator: Any) -> Any:
            if lanes_of(node) == 1 and self.needs_split(node):
                return self._from_shuffle(node, 0)
            return mutator.default_mutate(node)

        if not self.needs_split(expr):
            return expr
        out = mutate(expr, [(shuffle, on_shuffle)])
        if self.needs_split(out):
            raise CannotSplit(f"a scalar expression that reduces a vector ({short(expr)})")
        return out

    def lane(self, expr: Any, n: int) -> Any:
        """Lane n of a vector expression, as a scalar expression."""
        tvm = self.tvm
        prim, tirx = tvm.ir.prim.expr, tvm.tirx
        if lanes_of(expr) == 1:
            return self.scalar(expr)
        if isinstance(expr, prim.Ramp):
            base, stride = self.scalar(expr.base), self.scalar(expr.stride)
            if n == 0:
                return base
            if isinstance(stride, prim.IntImm):
                return prim.Add(base, prim.IntImm(dtype_of(stride), stride.value * n))
            return prim.Add(base, prim.Mul(stride, prim.IntImm(dtype_of(stride), n)))
        if isinstance(expr, prim.Broadcast):
            return self.scalar(expr.value)
        if isinstance(expr, tvm.ir.expr.TensorLoad):
            if any(lanes_of(i) != lanes_of(expr) for i in expr.indices[-1:]):
                raise CannotSplit(f"a vector load whose index has another lane count ({short(expr)})")
            return tirx.BufferLoad(expr.source, [self.lane(i, n) for i in expr.indices])
        if isinstance(expr, self.binary):
            return type(expr)(self.lane(expr.a, n), self.lane(expr.b, n))
        if isinstance(expr, self.unary):
            return type(expr)(self.lane(expr.a, n))
        if isinstance(expr, prim.Select):
            return prim.Select(self.lane(expr.condition, n), self.lane(expr.true_value, n),
                               self.lane(expr.false_value, n))
        if isinstance(expr, prim.Cast):
            return prim.Cast(str(dtype_of(expr).with_lanes(1)), self.lane(expr.value, n))
        if isinstance(expr, prim.Shuffle):
            return self._from_shuffle(expr, n)
        if isinstance(expr, prim.Let):
            return self._let_lane(expr, n)
        if isinstance(expr, tvm.ir.Call):
            return self._call_lane(expr, n)
        if isinstance(expr, tvm.ir.expr.Var):
            if expr.__chandle__() in self.split:
                return self.split[expr.__chandle__()][n]
            if has_c_type(dtype_of(expr)):
                return prim.Shuffle([expr], [prim.IntImm("int32", n)])
        raise CannotSplit(f"{type(expr).__name__} of type {dtype_of(expr)} ({short(expr)})")

    def _from_shuffle(self, expr: Any, n: int) -> Any:
        index = int(expr.indices[n].value)
        for vector in expr.vectors:
            count = lanes_of(vector)
            if index < count:
                return self.lane(vector, index) if count > 1 else self.scalar(vector)
            index -= count
        raise CannotSplit(f"a shuffle index out of range ({short(expr)})")

    def _let_lane(self, expr: Any, n: int) -> Any:
        """Lane n of a vector Let (TVM's floordiv and floormod of ints): the value's lane n bound to a
        scalar of its own, which lane n of the body reads."""
        prim = self.tvm.ir.prim.expr
        key = expr.var.__chandle__()
        var = self.made(f"{expr.var.name}_lane{n}", dtype_of(expr.var).with_lanes(1), expr)
        value = self.lane(expr.value, n) if lanes_of(expr.value) > 1 else self.scalar(expr.value)
        outer = self.split.get(key)
        self.split[key] = [var] * lanes_of(expr.var)     # only lane n is read below
        try:
            body = self.lane(expr.body, n)
        finally:
            if outer is None:
                del self.split[key]
            else:
                self.split[key] = outer
        return prim.Let(var, value, body)

    def made(self, name: str, dtype: Any, origin: Any) -> Any:
        """A new variable of this pass, remembered with the construct it stands for (unbound(): which
        of them a rewritten body leaves without a binding)."""
        var = self.tvm.ir.expr.Var(name, str(dtype))
        self.origins[var.__chandle__()] = origin
        return var

    def unbound(self, body: Any, params: Any) -> list[tuple[Any, Any]]:
        """(variable, the construct it stands for) of each variable of this pass that `body` reads
        without binding it: a rewrite that lost a binding, named before TVM's printer fails on it."""
        if not self.origins:
            return []
        found = self.tvm.tirx.analysis.undefined_vars(body, list(params))
        return [(v, self.origins[v.__chandle__()]) for v in found if v.__chandle__() in self.origins]

    def _call_lane(self, expr: Any, n: int) -> Any:
        tvm = self.tvm
        lanes = lanes_of(expr)
        args = []
        for arg in expr.args:
            count = lanes_of(arg)
            if count not in (1, lanes):
                raise CannotSplit(f"the intrinsic {expr.op.name} changing the lane count ({short(expr)})")
            args.append(self.lane(arg, n) if count > 1 else self.scalar(arg) if dtype_of(arg) else arg)
        ret = tvm.ir.PrimType(str(dtype_of(expr).with_lanes(1)))
        return tvm.ir.Call(expr.op, args, expr.attrs, expr.ty_args, expr.span, ret_ty=ret)

    # -- pieces of wide vectors ------------------------------------------------------------------

    def piece(self, expr: Any, start: int, width: int) -> Any:
        """Lanes [start, start + width) of a vector expression, as a vector (a scalar for width 1)."""
        tvm = self.tvm
        prim = tvm.ir.prim.expr
        if width == 1:
            return self.lane(expr, start)
        if lanes_of(expr) == 1:
            return prim.Broadcast(self.scalar(expr), width)
        dtype = dtype_of(expr)
        if isinstance(expr, prim.Ramp):
            stride = self.scalar(expr.stride)
            base = self.scalar(expr.base)
            if start:
                offset = prim.IntImm(dtype_of(stride), stride.value * start) if isinstance(stride, prim.IntImm) \
                    else prim.Mul(stride, prim.IntImm(dtype_of(stride), start))
                base = prim.Add(base, offset)
            return prim.Ramp(base, stride, width)
        if isinstance(expr, prim.Broadcast):
            return prim.Broadcast(self.scalar(expr.value), width)
        if isinstance(expr, tvm.ir.expr.TensorLoad) and all(lanes_of(i) == lanes_of(expr) for i in expr.indices[-1:]):
            return tvm.tirx.BufferLoad(expr.source, [*map(self.scalar, expr.indices[:-1]),
                                                     self.piece(expr.indices[-1], start, width)])
        if isinstance(expr, self.binary):
            return type(expr)(self.piece(expr.a, start, width), self.piece(expr.b, start, width))
        if isinstance(expr, self.unary):
            return type(expr)(self.piece(expr.a, start, width))
        if isinstance(expr, prim.Select):
            return prim.Select(self.piece(expr.condition, start, width), self.piece(expr.true_value, start, width),
                               self.piece(expr.false_value, start, width))
        if isinstance(expr, prim.Cast):
            return prim.Cast(str(dtype.with_lanes(width)), self.piece(expr.value, start, width))
        if isinstance(expr, tvm.ir.Call) and all(lanes_of(a) in (1, lanes_of(expr)) for a in expr.args):
            args = [self.piece(a, start, width) if lanes_of(a) > 1 else self.scalar(a) if dtype_of(a) else a
                    for a in expr.args]
            ret = tvm.ir.PrimType(str(dtype.with_lanes(width)))
            return tvm.ir.Call(expr.op, args, expr.attrs, expr.ty_args, expr.span, ret_ty=ret)
        if isinstance(expr, tvm.ir.expr.Var) and expr.__chandle__() in self.pieces:
            for begin, var in self.pieces[expr.__chandle__()]:
                if begin == start and lanes_of(var) == width:
                    return var
        lanes = [self.lane(expr, start + n) for n in range(width)]     # a shuffle, or pieces that do not line up
        return prim.Shuffle(lanes, [prim.IntImm("int32", n) for n in range(width)])

    def _piece_temps(self, name: str, dtype: Any, lanes: int, origin: Any) -> list[tuple[int, Any]]:
        return [(start, self.made(f"{name}_piece{start}", dtype.with_lanes(width), origin))
                for start, width in pieces(lanes)]

    def store_pieces(self, stmt: Any) -> Any:
        """A store of more than 16 lanes as pieces: each piece's value bound first, then stored."""
        tirx = self.tvm.tirx
        temps = self._piece_temps(stmt.buffer.name, dtype_of(stmt.value), lanes_of(stmt.value), stmt)
        binds = [tirx.Bind(t, self.piece(stmt.value, start, lanes_of(t))) for start, t in temps]
        stores = [tirx.BufferStore(stmt.buffer, t, [*map(self.scalar, stmt.indices[:-1]),
                                                    self.piece(stmt.indices[-1], start, lanes_of(t))])
                  for start, t in temps]
        return tirx.SeqStmt(binds + stores)

    def bind_pieces(self, stmt: Any) -> Any:
        """A variable of more than 16 lanes bound as pieces (its later uses read those)."""
        temps = self._piece_temps(stmt.var.name, dtype_of(stmt.var), lanes_of(stmt.var), stmt)
        self.pieces[stmt.var.__chandle__()] = temps
        self.split[stmt.var.__chandle__()] = [v for start, v in temps for v in self._lanes_of_var(v)]
        return self.tvm.tirx.SeqStmt([self.tvm.tirx.Bind(t, self.piece(stmt.value, start, lanes_of(t)))
                                      for start, t in temps])

    def _lanes_of_var(self, var: Any) -> list[Any]:
        prim = self.tvm.ir.prim.expr
        count = lanes_of(var)
        return [var] if count == 1 else [prim.Shuffle([var], [prim.IntImm("int32", n)]) for n in range(count)]

    def wide(self, expr: Any) -> bool:
        """Whether a vector expression has more lanes than C's vector types, of an element they have."""
        dtype = dtype_of(expr)
        return dtype is not None and dtype.lanes > MAX_LANES and not dtype.is_bool \
            and has_c_type(dtype.with_lanes(MAX_LANES))

    # -- statements ------------------------------------------------------------------------------

    def _temps(self, name: str, dtype: Any, lanes: int, origin: Any) -> list[Any]:
        return [self.made(f"{name}_lane{n}", dtype.with_lanes(1), origin) for n in range(lanes)]

    def store(self, stmt: Any) -> Any:
        """A vector store as lane values bound to scalars first, then one scalar store per lane."""
        tirx = self.tvm.tirx
        lanes = lanes_of(stmt.value)
        if lanes == 1:
            return tirx.BufferStore(stmt.buffer, self.scalar(stmt.value), [self.scalar(i) for i in stmt.indices])
        temps = self._temps(stmt.buffer.name, dtype_of(stmt.value), lanes, stmt)
        binds = [tirx.Bind(t, self.lane(stmt.value, n)) for n, t in enumerate(temps)]
        stores = [tirx.BufferStore(stmt.buffer, t, [self.lane(i, n) if lanes_of(i) > 1 else self.scalar(i)
                                                    for i in stmt.indices])
                  for n, t in enumerate(temps)]
        return tirx.SeqStmt(binds + stores)

    def bind(self, stmt: Any) -> Any:
        """A vector variable bound lane by lane to scalar variables (its later uses read those)."""
        tirx = self.tvm.tirx
        lanes = lanes_of(stmt.var)
        if lanes == 1:
            return tirx.Bind(stmt.var, self.scalar(stmt.value))
        temps = self._temps(stmt.var.name, dtype_of(stmt.var), lanes, stmt)
        binds = [tirx.Bind(t, self.lane(stmt.value, n)) for n, t in enumerate(temps)]
        self.split[stmt.var.__chandle__()] = temps
        return tirx.SeqStmt(binds)

    def evaluate(self, stmt: Any) -> Any:
        tirx = self.tvm.tirx
        lanes = lanes_of(stmt.value)
        if lanes == 1:
            return tirx.Evaluate(self.scalar(stmt.value))
        return tirx.SeqStmt([tirx.Evaluate(self.lane(stmt.value, n)) for n in range(lanes)])

    def _bind_piece(self, stmt: Any) -> Any:
        """A piece's binding, split into scalars where the piece holds what C cannot express."""
        if not self.needs_split(stmt.value):
            return stmt
        out = self.bind(stmt)
        chunk = self.split[stmt.var.__chandle__()]   # kept: a piece's own store reads its scalars too
        for key, temps in self.pieces.items():       # the wide variable's lanes read the scalars
            if any(v.same_as(stmt.var) for _, v in temps):
                lanes = self.split[key]
                start = next(b for b, v in temps if v.same_as(stmt.var))
                lanes[start:start + len(chunk)] = chunk
                self.pieces[key] = [(b, v) for b, v in temps if not v.same_as(stmt.var)]
        return out

    def handlers(self) -> list[tuple[type, Callable[[Any, Any], Any]]]:
        """structural_mutate callbacks that split the statements needing it (in program order)."""
        tirx = self.tvm.tirx

        def split_store(stmt: Any) -> Any:
            return self.store(stmt) if self.needs_split(stmt.value, *stmt.indices) else stmt

        def on_store(stmt: Any, _m: Any) -> Any:
            if self.wide(stmt.value) and all(lanes_of(i) in (1, lanes_of(stmt.value)) for i in stmt.indices):
                out = self.store_pieces(stmt)
                return tirx.SeqStmt([split_store(s) if isinstance(s, tirx.BufferStore) else self._bind_piece(s)
                                     for s in out.seq])
            return split_store(stmt)

        def on_bind(stmt: Any, _m: Any) -> Any:
            if self.wide(stmt.var):
                out = self.bind_pieces(stmt)
                return tirx.SeqStmt([self._bind_piece(s) for s in out.seq])
            return self.bind(stmt) if self.needs_split(stmt.var, stmt.value) else stmt

        def on_evaluate(stmt: Any, _m: Any) -> Any:
            return self.evaluate(stmt) if self.needs_split(stmt.value) else stmt

        return [(tirx.BufferStore, on_store), (tirx.Bind, on_bind), (tirx.Evaluate, on_evaluate)]


#: the widest vector C's types hold; wider ones are cut into pieces of at most this many lanes
MAX_LANES = 16


def pieces(lanes: int) -> list[tuple[int, int]]:
    """(start, width) of the pieces a vector of `lanes` is cut into: 16 lanes each, then powers of two."""
    out, start = [], 0
    for width in (16, 8, 4, 2, 1):
        while lanes - start >= width:
            out.append((start, width))
            start += width
    return out
