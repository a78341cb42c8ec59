"""The IR pass run on the host module just before TVM prints it as C: what its C printer gets wrong.

Applied by codegen.py, which wraps TVM's `target.build.c` while builder/lower.py lowers a module.
On the final host IR (after TVM's own lowering) it

- splits vector statements C cannot hold into lanes (lanes.py);
- turns vector casts into `__builtin_convertvector` helpers (a C cast between clang vectors of
  the same size reinterprets the bits: int32x4 -> float32x4 would be silently wrong);
- rebuilds 8-bit gathers as vectors of scalar loads (TVM packs them into one int);
- calls C functions for intrinsics that have no C lowering (exp10, exp2, fabs, fmod, clz,
  popcount, every math function on float16) and a static slot for tvm_static_handle;
- writes float constants the printer would print wrongly (inf, -inf, nan, and values its six
  digits do not round-trip) from their bits;
- binds a buffer's stack storage to a variable before the buffer is declared (TVM prints the
  storage's declaration in the middle of the buffer's, for packed calls with buffer arguments);
- calls a helper for a min or max that reads memory: the printer binds such operands to variables
  it reuses for the same text later in the block, even after a store to that place (an unrolled
  max reduction `B[i] = max(B[i], A[i, k])` then kept only its last step).

A construct it can neither print nor split is a HostCodeError naming it and the function.
"""
from __future__ import annotations

import itertools
import math
import struct
from typing import Any

from ...errors import HostCodeError
from .lanes import LaneSplitter
from .mathlib import PUBLIC as _MATHLIB
from .prelude import STATIC_HANDLE_PREFIX, convert_helper, has_c_type, min_max_helper, vector_load
from .source import tir_name
from .vector_buffers import flatten_vector_buffers
from .vector_ir import CannotSplit, dtype_of, lanes_of, mutate, short

#: TVM op -> C math function (double form; float adds 'f'); float16 computes in float.
_MATH = {"tirx.exp": "exp", "tirx.exp2": "exp2", "tirx.exp10": "jitflow_exp10", "tirx.log": "log",
         "tirx.log2": "log2", "prim.log2": "log2", "tirx.log10": "log10", "tirx.log1p": "log1p",
         "tirx.sqrt": "sqrt", "tirx.sin": "sin", "tirx.cos": "cos", "tirx.tan": "tan", "tirx.sinh": "sinh",
         "tirx.cosh": "cosh", "tirx.tanh": "tanh", "tirx.asin": "asin", "tirx.acos": "acos",
         "tirx.atan": "atan", "tirx.asinh": "asinh", "tirx.acosh": "acosh", "tirx.atanh": "atanh",
         "tirx.erf": "erf", "tirx.floor": "floor", "tirx.ceil": "ceil", "prim.ceil": "ceil",
         "tirx.trunc": "trunc", "tirx.round": "nearbyint", "tirx.nearbyint": "nearbyint", "tirx.fabs": "fabs",
         "tirx.pow": "pow", "tirx.fmod": "fmod", "tirx.hypot": "hypot", "tirx.ldexp": "ldexp",
         "tirx.copysign": "copysign", "tirx.nextafter": "nextafter", "tirx.atan2": "atan2", "tirx.fma": "fma"}
_BITS = {"prim.clz": "jitflow_clz", "tirx.clz": "jitflow_clz", "tirx.popcount": "jitflow_popcount"}
#: float32 libm functions whose scalar calls become mathlib.py's inline definitions (which clang's loop
#: vectorizer vectorizes); sin, cos and tan keep libm in scalar code (their inline form has a branch
#: for large arguments, which stops the vectorizer), and sqrt, fabs, copysign are clang's builtins already.
SCALAR_MATH = frozenset(_MATHLIB) - {"sinf", "cosf", "tanf", "sqrtf", "fabsf", "copysignf"}
#: TIR ops whose float32 vector form is a mathlib.py vector function (a vector statement stays a vector)
VECTOR_MATH = frozenset(op for op, base in _MATH.items() if base.removeprefix("jitflow_") + "f" in _MATHLIB)
_IEEE_FLOAT = 2   # DLPack's type code of float16/32/64 (bfloat16 and float8 have their own)
_FLOAT_BITS = {16: ("<e", "<h", "int16"), 32: ("<f", "<i", "int32"), 64: ("<d", "<q", "int64")}


def _float_name(base: str) -> str:
    """The C function computing libm's `base` on float32: libm's own, or mathlib.py's stand-in."""
    plain = base.removeprefix("jitflow_") + "f"
    return _MATHLIB[plain] if plain in SCALAR_MATH else base + "f"


def _prints_exactly(value: float, bits: int) -> bool:
    """Whether TVM's printer (C++ std::scientific: six digits after the point) keeps the value."""
    if not math.isfinite(value):
        return False
    text = f"{value:e}"
    if bits == 64:
        return float(text) == value
    if bits == 32:
        return struct.unpack("<f", struct.pack("<f", float(text)))[0] == value
    return True   # seven significant digits are more than float16 needs


class _Rewriter:
    """The expression rewrites of one module (one counter for static handles across its functions)."""

    def __init__(self) -> None:
        import tvm

        self.tvm = tvm
        self.handles = itertools.count()

    def _extern(self, dtype: str, name: str, *args: Any) -> Any:
        return self.tvm.tirx.call_pure_extern(dtype, name, *args)

    def cast(self, node: Any, mutator: Any) -> Any:
        value = mutator.mutate(node.value)
        dst, src = dtype_of(node), dtype_of(value)
        if dst.lanes > 1 and dst != src and has_c_type(dst) and has_c_type(src) and not src.is_bool:
            return self._extern(str(dst), convert_helper(dst, src), value)
        return node if value.same_as(node.value) else self.tvm.ir.prim.expr.Cast(str(dst), value)

    def float_imm(self, node: Any, _mutator: Any) -> Any:
        dtype = dtype_of(node)
        if dtype.type_code != _IEEE_FLOAT or _prints_exactly(node.value, dtype.bits):
            return node
        float_fmt, int_fmt, int_dtype = _FLOAT_BITS[dtype.bits]
        pattern = struct.unpack(int_fmt, struct.pack(float_fmt, node.value))[0]
        return self._extern(str(dtype), f"jitflow_f{dtype.bits}_from_bits",
                            self.tvm.ir.prim.expr.IntImm(int_dtype, pattern))

    def call(self, node: Any, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        name = getattr(node.op, "name", "")
        dtype = dtype_of(node)
        if name == "tirx.tvm_static_handle":
            return self.tvm.tirx.call_extern("handle", f"{STATIC_HANDLE_PREFIX}{next(self.handles)}")
        if dtype is None:
            return node
        if dtype.lanes != 1:
            if name in VECTOR_MATH and dtype.type_code == _IEEE_FLOAT and dtype.bits in (16, 32):
                return self._vector_math(_MATH[name], dtype, list(node.args))
            return node
        if name in _MATH and dtype.type_code == _IEEE_FLOAT:
            return self._math(_MATH[name], dtype, list(node.args))
        if name == "tirx.call_pure_extern" and str(dtype) == "float32" and node.args[0].value in SCALAR_MATH \
                and all(str(dtype_of(a)) == "float32" for a in node.args[1:]):
            return self._extern("float32", _MATHLIB[node.args[0].value], *node.args[1:])
        if name in _BITS:
            return self._bits(_BITS[name], dtype, node.args[0])
        return node

    def _math(self, base: str, dtype: Any, args: list[Any]) -> Any:
        cast = self.tvm.ir.prim.expr.Cast
        if dtype.bits == 64:
            return self._extern("float64", base, *args)
        name = _float_name(base)
        if dtype.bits == 32:
            return self._extern("float32", name, *args)
        widened = [cast("float32", a) if dtype_of(a) == dtype else a for a in args]   # float16 via float
        return cast(str(dtype), self._extern("float32", name, *widened))

    def _vector_math(self, base: str, dtype: Any, args: list[Any]) -> Any:
        """A vector of float32 (float16 through float32) in one call of mathlib.py's vector form."""
        name = f"{_MATHLIB[base.removeprefix('jitflow_') + 'f']}_x{dtype.lanes}"
        if dtype.bits == 32:
            return self._extern(str(dtype), name, *args)
        wide = self.tvm.DataType(f"float32x{dtype.lanes}")
        widened = [self._extern(str(wide), convert_helper(wide, dtype), a) if dtype_of(a) == dtype else a
                   for a in args]
        return self._extern(str(dtype), convert_helper(dtype, wide), self._extern(str(wide), name, *widened))

    def _bits(self, base: str, dtype: Any, arg: Any) -> Any:
        cast = self.tvm.ir.prim.expr.Cast
        bits = dtype_of(arg).bits
        width = 64 if bits > 32 else 32
        unsigned = cast(f"uint{width}", cast(f"uint{bits}", arg))   # zero-extend, as the bits are counted
        count = self._extern("int32", f"{base}{width}", unsigned)
        if base == "jitflow_clz" and bits < width:
            count = self.tvm.ir.prim.expr.Sub(count, self.tvm.ir.prim.expr.IntImm("int32", width - bits))
        return count if str(dtype) == "int32" else cast(str(dtype), count)

    def min_max(self, node: Any, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        which = "max" if isinstance(node, self.tvm.ir.prim.expr.Max) else "min"
        helper = min_max_helper(which, dtype_of(node))
        if helper is None or not _reads_memory(node):
            return node
        return self._extern(str(dtype_of(node)), helper, node.a, node.b)

    def load(self, node: Any, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        dtype = dtype_of(node)
        if dtype is None or dtype.lanes == 1 or _contiguous(node):
            return node
        if _unit_stride(node) and has_c_type(dtype):
            # TVM prints a stride-1 load at a base it cannot prove aligned (a let-bound offset, say) as a
            # gather of lanes, which clang does not always put back together (a 32-lane accumulator
            # kept in memory, reloaded at shifted offsets): one vector load instead (the prelude's types
            # have the element's alignment, so it is safe at any offset)
            base = self.tvm.tirx.BufferLoad(node.source, [*node.indices[:-1], node.indices[-1].base])
            return self.tvm.tirx.call_extern(str(dtype), vector_load(dtype), self.tvm.tirx.address_of(base))
        if dtype.bits != 8 or dtype.type_code not in (0, 1):
            return node
        # TVM prints an 8-bit gather as one int OR-ed from shifted bytes: build the vector instead
        prim = self.tvm.ir.prim.expr
        lanes = LaneSplitter()
        return prim.Shuffle([lanes.lane(node, n) for n in range(dtype.lanes)],
                            [prim.IntImm("int32", n) for n in range(dtype.lanes)])

    def seq(self, node: Any, mutator: Any) -> Any:
        """Children in order, nested sequences flattened, stack storage bound before its buffer."""
        out: list[Any] = []
        for child in node.seq:
            out.extend(_flat(mutator.mutate(child), self.tvm.tirx.SeqStmt))
        return self.tvm.tirx.SeqStmt([s for stmt in out for s in self._hoisted(stmt)])

    def _hoisted(self, stmt: Any) -> list[Any]:
        tvm = self.tvm
        if not isinstance(stmt, tvm.tirx.DeclBuffer) or isinstance(stmt.data, tvm.ir.expr.Var) \
                or not _calls(stmt.data, "tirx.tvm_stack_alloca"):
            return [stmt]
        pointer = tvm.ir.PointerType(tvm.ir.PrimType(str(stmt.buffer.dtype)))
        data = tvm.ir.expr.Var(f"{stmt.buffer.name}_data", pointer)
        return [tvm.tirx.Bind(data, stmt.data), tvm.tirx.DeclBuffer(stmt.buffer, data=data)]

    def handlers(self) -> list[tuple[Any, Any]]:
        tvm = self.tvm
        prim = tvm.ir.prim.expr
        return [(tvm.tirx.SeqStmt, self.seq), (prim.Cast, self.cast), (prim.FloatImm, self.float_imm),
                (tvm.ir.expr.TensorLoad, self.load), (tvm.ir.Call, self.call), ((prim.Min, prim.Max), self.min_max)]


def _min_max_reading_memory(body: Any) -> bool:
    """Whether a function body has a min or max whose operands load from a buffer."""
    import tvm
    import tvm_ffi

    prim = tvm.ir.prim.expr

    def visit(node: Any) -> Any:
        return tvm_ffi.VisitInterrupt(node) if _reads_memory(node) else None

    return tvm_ffi.structural_walk(body, [((prim.Min, prim.Max), visit)], order="pre") is not None


def _reads_memory(expr: Any) -> bool:
    """Whether an expression loads from a buffer."""
    import tvm
    import tvm_ffi

    return tvm_ffi.structural_walk(expr, [(tvm.ir.expr.TensorLoad, lambda n: tvm_ffi.VisitInterrupt(n))],
                                   order="pre") is not None


def _contiguous(load: Any) -> bool:
    """Whether TVM prints this vector load as one `*(T*)` access (stride-1 ramp at an aligned base)."""
    import tvm
    import tvm.sym

    index = load.indices[-1]
    if not isinstance(index, tvm.ir.prim.expr.Ramp) or not isinstance(index.stride, tvm.ir.prim.expr.IntImm) \
            or index.stride.value != 1:
        return False
    found = tvm.sym.Analyzer().modular_set(index.base)
    lanes = lanes_of(load)
    return found.coeff % lanes == 0 and found.base % lanes == 0


def _unit_stride(load: Any) -> bool:
    """Whether a vector load reads consecutive elements of a buffer of scalars (a stride-1 ramp)."""
    import tvm

    index = load.indices[-1]
    return isinstance(index, tvm.ir.prim.expr.Ramp) and isinstance(index.stride, tvm.ir.prim.expr.IntImm) \
        and index.stride.value == 1 and lanes_of(index) == lanes_of(load)


def _calls(expr: Any, op_name: str) -> bool:
    import tvm
    import tvm_ffi

    def visit(node: Any) -> Any:
        hit = isinstance(node, tvm.ir.Call) and getattr(node.op, "name", "") == op_name
        return tvm_ffi.VisitInterrupt(node) if hit else None

    return tvm_ffi.structural_walk(expr, visit, order="pre") is not None


def _flat(stmt: Any, seq_type: type) -> list[Any]:
    return [s for child in stmt.seq for s in _flat(child, seq_type)] if isinstance(stmt, seq_type) else [stmt]


def _statement(node: Any) -> str:
    """What a split statement (or expression) is, in a line: TVMScript prints a statement after the
    declarations of what it uses."""
    import tvm

    if isinstance(node, tvm.tirx.BufferStore):
        return f"the store of {dtype_of(node.value)} into {node.buffer.name}[{short(node.indices[-1])}]"
    if isinstance(node, tvm.tirx.Bind):
        return f"the binding of {node.var.name} to {dtype_of(node.value)} ({short(node.value)})"
    return f"the {type(node).__name__} {short(node)}"


def function_name(gvar: Any, func: Any) -> str:
    """The name a TIR function has in the library (its global symbol), else its name in the module."""
    symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
    return tir_name(str(symbol) if symbol is not None else gvar.name_hint)


_REWRITTEN_CALLS = frozenset([*_MATH, *_BITS, "tirx.tvm_static_handle", "tirx.tvm_stack_alloca"])


def needs_legalizing(func: Any) -> bool:
    """Whether anything in `func` needs the whole pass below: a vector (lanes, casts, gathers), an
    intrinsic without C lowering, a static handle, stack storage for a packed call, a float constant
    the printer would print wrongly. One walk that stops at the first; most kernels have none."""
    import tvm
    import tvm_ffi

    prim = tvm.ir.prim.expr
    stop = tvm_ffi.VisitInterrupt

    def vector(node: Any) -> Any:
        return stop(node)

    def typed(node: Any) -> Any:
        dtype = dtype_of(node)
        return stop(node) if dtype is not None and dtype.lanes != 1 else None

    def call(node: Any) -> Any:
        name = getattr(node.op, "name", "")
        if name in _REWRITTEN_CALLS or (name == "tirx.call_pure_extern" and node.args[0].value in SCALAR_MATH):
            return stop(node)
        return typed(node)

    def float_imm(node: Any) -> Any:
        dtype = dtype_of(node)
        return stop(node) if dtype.type_code == _IEEE_FLOAT and not _prints_exactly(node.value, dtype.bits) \
            else None

    callbacks = [((prim.Ramp, prim.Broadcast, prim.Shuffle), vector), (tvm.ir.Call, call),
                 ((prim.Cast, tvm.ir.expr.TensorLoad), typed), (prim.FloatImm, float_imm)]
    return tvm_ffi.structural_walk(func.body, callbacks, order="pre") is not None


def legalize_module(mod: Any) -> Any:
    """The host IRModule with every PrimFunc rewritten for TVM's C printer (the same object if unchanged)."""
    import tvm

    rewriter = _Rewriter()
    updates = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        if not needs_legalizing(func):
            if _min_max_reading_memory(func.body):      # that alone: the one rewrite, not the whole pass
                prim = tvm.ir.prim.expr
                updates[gvar] = func.with_body(mutate(func.body, [((prim.Min, prim.Max), rewriter.min_max)]))
            continue
        splitter = LaneSplitter(VECTOR_MATH)
        try:
            body = mutate(flatten_vector_buffers(func.body), [(tvm.tirx.SeqStmt, rewriter.seq), *splitter.handlers()])
            body = mutate(body, rewriter.handlers())
        except CannotSplit as exc:
            raise HostCodeError(f"{exc} (no C vector type or operator for it)",
                                [function_name(gvar, func)]) from None
        lost = splitter.unbound(body, func.params)
        if lost:
            var, origin = lost[0]
            raise HostCodeError(f"{_statement(origin)} (split into C vectors and lanes, its part {var.name} was "
                                "left unbound)", [function_name(gvar, func)])
        if not body.same_as(func.body):
            updates[gvar] = func.with_body(body)
    if not updates:
        return mod
    out = mod.clone()
    for gvar, func in updates.items():
        out.update_func(gvar, func)
    return out
