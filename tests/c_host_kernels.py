"""A corpus of kernels for each construct TVM's C host printer gets wrong, with numpy references.

Shared by tests/builder/test_c_host.py (CI: jitflow's C host against numpy and TVM's LLVM host)
and benchmarks/c_host_corpus.py (how many build and match with each host). Each group becomes one
IRModule, so a test builds it once; each case is one function of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np
import tvm
from tvm.script import tirx as T

BF16 = ml_dtypes.bfloat16
N = 64


@dataclass
class Case:
    """One function: its arguments (outputs last), what they must hold afterwards, and how close."""

    name: str
    func: object
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    expected: Callable[[list[np.ndarray]], list[np.ndarray]]   # the outputs, from the inputs
    outputs: int = 1                                            # how many trailing arguments are outputs
    rtol: float = 0.0
    atol: float = 0.0


def _normal(*shapes, dtype="float32", outs=(), scale=3.0):
    def make(rng):
        arrays = [(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]
        return arrays + [np.zeros(s, d) for s, d in outs]
    return make


def _ints(*shapes, dtype="int32", outs=(), low=-50, high=50):
    def make(rng):
        arrays = [rng.integers(low, high, s).astype(dtype) for s in shapes]
        return arrays + [np.zeros(s, d) for s, d in outs]
    return make


# -- vectors: ramp, broadcast, loads, stores, casts ----------------------------------------------

def fma_vec(lanes, dtype="float32", n=N):
    @T.prim_func
    def f(A: T.Buffer((n,), dtype), B: T.Buffer((n,), dtype), C: T.Buffer((n,), dtype)):
        for i in range(n // lanes):
            for j in T.vectorized(lanes):
                C[i * lanes + j] = A[i * lanes + j] * B[i * lanes + j] + A[i * lanes + j]
    return f


def ramp_vec(lanes):
    @T.prim_func
    def f(A: T.Buffer((N,), "int32"), D: T.Buffer((N,), "int32")):
        for i in range(N // lanes):
            for j in T.vectorized(lanes):
                D[i * lanes + j] = T.max((i * lanes + j) * 3 - A[i * lanes + j], A[i * lanes + j] // 2)
    return f


def cast_vec(src, dst, lanes):
    @T.prim_func
    def f(A: T.Buffer((N,), src), C: T.Buffer((N,), dst)):
        for i in range(N // lanes):
            for j in T.vectorized(lanes):
                C[i * lanes + j] = T.Cast(dst, A[i * lanes + j])
    return f


@T.prim_func
def explicit_vectors(A: T.Buffer((64,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((64,), "float32"),
                     D: T.Buffer((64,), "float32")):
    for i in range(16):
        C[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4, 1, 4)] * T.Broadcast(B[1], 4) \
            + T.Cast("float32x4", T.Ramp(i * 4, 1, 4))
        D[T.Ramp(i, 16, 4)] = A[T.Ramp(i * 4, 1, 4)]          # a 16x4 <-> 4x16 transpose: a strided store


@T.prim_func
def select_vec(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N // 8):
        for j in T.vectorized(8):
            C[i * 8 + j] = T.Select(A[i * 8 + j] > T.float32(0), A[i * 8 + j], A[i * 8 + j] * T.float32(0.125))


@T.prim_func
def exp_vec(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N // 4):
        for j in T.vectorized(4):
            C[i * 4 + j] = T.exp(A[i * 4 + j] * T.float32(0.25))


@T.prim_func
def shift_in_place(A: T.Buffer((33,), "float32")):
    A[T.Ramp(1, 1, 32)] = A[T.Ramp(0, 1, 32)] * T.Broadcast(T.float32(2), 32)   # reads all lanes, then writes


def _fma(a):
    return [a[0] * a[1] + a[0]]


def _shifted(a):
    out = a[0].copy()
    out[1:] = a[0][:-1] * 2
    return [out]


VECTORS = [
    *[Case(f"fma_f32_x{n}", fma_vec(n), _normal(N, N, outs=[(N, "float32")]), _fma, rtol=1e-6, atol=1e-5)
      for n in (2, 4, 8, 16)],
    Case("fma_f32_x32", fma_vec(32), _normal(N, N, outs=[(N, "float32")]), _fma, rtol=1e-6, atol=1e-5),
    Case("fma_f32_x3", fma_vec(3, n=63), _normal(63, 63, outs=[(63, "float32")]), _fma, rtol=1e-6, atol=1e-5),
    Case("fma_f16_x8", fma_vec(8, "float16"), _normal(N, N, dtype="float16", outs=[(N, "float16")]), _fma, rtol=2e-3,
         atol=1e-2),
    *[Case(f"ramp_i32_x{n}", ramp_vec(n), _ints(N, outs=[(N, "int32")]),
           lambda a: [np.maximum(np.arange(N, dtype="int32") * 3 - a[0], a[0] // 2)]) for n in (4, 16)],
    Case("cast_f16_f32_x8", cast_vec("float16", "float32", 8), _normal(N, dtype="float16", outs=[(N, "float32")]),
         lambda a: [a[0].astype("float32")]),
    Case("cast_i32_f32_x4", cast_vec("int32", "float32", 4), _ints(N, outs=[(N, "float32")], low=-2**24, high=2**24),
         lambda a: [a[0].astype("float32")]),
    Case("cast_f32_i32_x4", cast_vec("float32", "int32", 4), _normal(N, outs=[(N, "int32")], scale=1e3),
         lambda a: [a[0].astype("int32")]),
    Case("cast_i8_i32_x16", cast_vec("int8", "int32", 16), _ints(N, dtype="int8", outs=[(N, "int32")], low=-128,
                                                                   high=128), lambda a: [a[0].astype("int32")]),
    Case("cast_f32_f16_x16", cast_vec("float32", "float16", 16), _normal(N, outs=[(N, "float16")]),
         lambda a: [a[0].astype("float16")]),
    Case("cast_u8_f16_x8", cast_vec("uint8", "float16", 8), _ints(N, dtype="uint8", outs=[(N, "float16")], low=0,
                                                                    high=256), lambda a: [a[0].astype("float16")]),
    Case("explicit_vectors", explicit_vectors, _normal(64, 4, outs=[(64, "float32"), (64, "float32")]),
         lambda a: [a[0] * a[1][1] + np.arange(64, dtype="float32"), a[0].reshape(16, 4).T.reshape(64)],
         outputs=2, rtol=1e-6),
    Case("select_f32_x8", select_vec, _normal(N, outs=[(N, "float32")]),
         lambda a: [np.where(a[0] > 0, a[0], a[0] * np.float32(0.125))]),
    Case("exp_f32_x4", exp_vec, _normal(N, outs=[(N, "float32")]), lambda a: [np.exp(a[0] * np.float32(0.25))],
         rtol=1e-6),
    Case("shift_in_place_x32", shift_in_place, _normal(33), _shifted),
]


# -- bfloat16 --------------------------------------------------------------------------------------

def _bf16(rng, n=N):
    return (rng.standard_normal(n) * 4).astype(BF16)


def bf16_binary(lanes, op):
    @T.prim_func
    def f(A: T.Buffer((N,), "bfloat16"), B: T.Buffer((N,), "bfloat16"), C: T.Buffer((N,), "bfloat16")):
        for i in range(N // lanes):
            for j in T.vectorized(lanes):
                C[i * lanes + j] = op(A[i * lanes + j], B[i * lanes + j])
    return f


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def _bf16_ref(op):
    return lambda a: [op(a[0].astype("float32"), a[1].astype("float32")).astype(BF16)]


BFLOAT16 = [
    Case("bf16_add_x8", bf16_binary(8, _add), lambda r: [_bf16(r), _bf16(r), np.zeros(N, BF16)], _bf16_ref(_add)),
    Case("bf16_mul_x32", bf16_binary(32, _mul), lambda r: [_bf16(r), _bf16(r), np.zeros(N, BF16)], _bf16_ref(_mul)),
    Case("bf16_add_scalar", bf16_binary(1, _add), lambda r: [_bf16(r), _bf16(r), np.zeros(N, BF16)],
         _bf16_ref(_add)),
    Case("bf16_to_f32_x8", cast_vec("bfloat16", "float32", 8), lambda r: [_bf16(r), np.zeros(N, "float32")],
         lambda a: [a[0].astype("float32")]),
    Case("f32_to_bf16_x16", cast_vec("float32", "bfloat16", 16), _normal(N, outs=[(N, BF16)]),
         lambda a: [a[0].astype(BF16)]),
]


# -- packed calls with buffer arguments (TVM's contrib sort, topk, random) ------------------------

@T.prim_func
def argsort_rows(A: T.Buffer((4, 16), "float32"), Order: T.Buffer((4, 16), "int32")):
    T.evaluate(T.call_packed("tvm.contrib.sort.argsort", A, Order, 1, True))


@T.prim_func
def sort_columns_desc(A: T.Buffer((8, 4), "float32"), S: T.Buffer((8, 4), "float32")):
    T.evaluate(T.call_packed("tvm.contrib.sort.sort", A, S, 0, False))


@T.prim_func
def topk_rows(A: T.Buffer((4, 16), "float32"), V: T.Buffer((4, 3), "float32"), Ix: T.Buffer((4, 3), "int32")):
    T.evaluate(T.call_packed("tvm.contrib.sort.topk", A, V, Ix, 3, 1, "both", False))


@T.prim_func
def uniform_then_scale(U: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    T.evaluate(T.call_packed("tvm.contrib.random.uniform", T.float32(2), T.float32(5), U))
    for i in range(256):
        C[i] = U[i] * T.float32(2)


def _topk(a):
    order = np.argsort(-a[0], axis=1, kind="stable")[:, :3]
    return [np.take_along_axis(a[0], order, 1), order.astype("int32")]


PACKED = [
    Case("argsort_rows", argsort_rows, _normal((4, 16), outs=[((4, 16), "int32")]),
         lambda a: [np.argsort(a[0], axis=1, kind="stable").astype("int32")]),
    Case("sort_columns_desc", sort_columns_desc, _normal((8, 4), outs=[((8, 4), "float32")]),
         lambda a: [-np.sort(-a[0], axis=0)]),
    Case("topk_rows", topk_rows, _normal((4, 16), outs=[((4, 3), "float32"), ((4, 3), "int32")]), _topk,
         outputs=2),
]


def uniform_ok(outputs: list[np.ndarray]) -> bool:
    """The random case's check: values in [2, 5), doubled into C, and not all the same."""
    u, c = outputs
    return bool(((u >= 2) & (u < 5)).all() and np.array_equal(c, u * 2) and np.unique(u).size > 200)


# -- intrinsics without a C lowering ---------------------------------------------------------------

def unary(dtype, body, n=N):
    @T.prim_func
    def f(A: T.Buffer((n,), dtype), C: T.Buffer((n,), dtype)):
        for i in range(n):
            C[i] = body(A[i])
    return f


@T.prim_func
def exp2_fabs_fma(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N):
        C[i] = T.exp2(A[i]) + T.abs(A[i]) + T.call_intrin("float32", "tirx.fma", A[i], B[i], A[i])


def bit_counts(dtype):
    @T.prim_func
    def f(A: T.Buffer((N,), dtype), Z: T.Buffer((N,), "int32"), P: T.Buffer((N,), dtype)):
        for i in range(N):
            Z[i] = T.clz(A[i])
            P[i] = T.popcount(A[i])
    return f


def _bits(bits):
    def expected(a):
        u = a[0].astype(f"uint{bits}").astype(object)
        clz = [bits - int(v).bit_length() for v in u]
        pop = [bin(int(v)).count("1") for v in u]
        return [np.array(clz, "int32"), np.array(pop, a[0].dtype)]
    return expected


def _nonzero_ints(dtype, bits):
    def make(rng):
        a = rng.integers(1, 2 ** (bits - 1), N, dtype="int64").astype(dtype)
        a[::3] >>= rng.integers(0, bits - 2, a[::3].size)          # many different leading-zero counts
        a[a == 0] = 1                                               # clz(0) is undefined in LLVM's build
        a[1] = -1
        return [a, np.zeros(N, "int32"), np.zeros(N, dtype)]
    return make


def _f16_math(x):
    return T.exp(x * T.float16(0.5)) + T.log(T.abs(x) + T.float16(1)) + T.sqrt(T.abs(x)) + T.tanh(x)


def _f16_math_ref(a):
    x = a[0].astype("float32")
    return [(np.exp(x * 0.5) + np.log(np.abs(x) + 1) + np.sqrt(np.abs(x)) + np.tanh(x)).astype("float16")]


INTRINSICS = [
    Case("exp10_f32", unary("float32", T.exp10), _normal(N, outs=[(N, "float32")], scale=2),
         lambda a: [(10.0 ** a[0].astype("float64")).astype("float32")], rtol=2e-6),
    Case("exp10_f64", unary("float64", T.exp10), _normal(N, dtype="float64", outs=[(N, "float64")], scale=2),
         lambda a: [10.0 ** a[0]], rtol=1e-10),                  # TVM's LLVM host: exp(x * ln 10)
    Case("exp10_f16", unary("float16", T.exp10), _normal(N, dtype="float16", outs=[(N, "float16")], scale=1),
         lambda a: [(10.0 ** a[0].astype("float32")).astype("float16")], rtol=2e-3),
    Case("exp2_fabs_fma_f32", exp2_fabs_fma, _normal(N, N, outs=[(N, "float32")], scale=2),
         lambda a: [np.exp2(a[0]) + np.abs(a[0]) + (a[0] * a[1] + a[0])], rtol=1e-5, atol=1e-5),
    Case("math_f16", unary("float16", _f16_math), _normal(N, dtype="float16", outs=[(N, "float16")], scale=1),
         _f16_math_ref, rtol=5e-3, atol=5e-3),
    Case("clz_popcount_i32", bit_counts("int32"), _nonzero_ints("int32", 32), _bits(32), outputs=2),
    Case("clz_popcount_i64", bit_counts("int64"), _nonzero_ints("int64", 64), _bits(64), outputs=2),
]


# -- inf and nan literals, float constants -------------------------------------------------------

@T.prim_func
def infinities(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = T.Select(A[i] > T.float32("-inf"), T.max(A[i], T.float32("-inf")), T.float32(-1))
        C[i] = T.Select(A[i] == T.float32("inf"), T.float32("nan"), T.Select(A[i] < T.float32(0),
                        T.float32("-inf"), A[i]))


@T.prim_func
def exact_constants(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float64"), B: T.Buffer((8,), "float32"),
                    E: T.Buffer((8,), "float64"), M: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = A[i] * T.float32(0.3333333432674408)         # six printed digits do not give this float back
        E[i] = D[i] * T.float64(math.pi)
        M[i] = T.min_value("float32")


@T.prim_func
def masked_softmax(S: T.Buffer((4, 8), "float32"), P: T.Buffer((4, 8), "float32")):
    M = T.alloc_buffer((4,), "float32")
    Z = T.alloc_buffer((4,), "float32")
    for r in range(4):
        M[r] = T.float32("-inf")
        Z[r] = T.float32(0)
        for c in range(8):
            M[r] = T.max(M[r], T.Select(c > r * 2, T.float32("-inf"), S[r, c]))
        for c in range(8):
            Z[r] = Z[r] + T.Select(c > r * 2, T.float32(0), T.exp(S[r, c] - M[r]))
        for c in range(8):
            P[r, c] = T.Select(c > r * 2, T.float32(0), T.exp(S[r, c] - M[r]) / Z[r])


def _special(rng):
    a = np.array([1.5, -2.0, np.inf, -np.inf, np.nan, -0.5, 0.0, 3.0], "float32")
    return [a, np.zeros(8, "float32"), np.zeros(8, "float32")]


def _infinities(a):
    x = a[0]
    with np.errstate(invalid="ignore"):
        b = np.where(x > -np.inf, np.maximum(x, -np.inf), -1).astype("float32")
        c = np.where(x == np.inf, np.nan, np.where(x < 0, -np.inf, x)).astype("float32")
    return [b, c]


def _masked_softmax(a):
    s = a[0].astype("float64")
    masked = np.where(np.arange(8)[None, :] > 2 * np.arange(4)[:, None], -np.inf, s)
    e = np.exp(masked - masked.max(1, keepdims=True))
    return [(e / e.sum(1, keepdims=True)).astype("float32")]


FLOATS = [
    Case("infinities", infinities, _special, _infinities, outputs=2),
    Case("exact_constants", exact_constants,
         lambda r: [r.standard_normal(8).astype("float32"), r.standard_normal(8), np.zeros(8, "float32"),
                    np.zeros(8), np.zeros(8, "float32")],
         lambda a: [a[0] * np.float32(0.3333333432674408), a[1] * math.pi,
                    np.full(8, np.finfo("float32").min, "float32")], outputs=3),
    Case("masked_softmax", masked_softmax, _normal((4, 8), outs=[((4, 8), "float32")]), _masked_softmax,
         rtol=1e-6, atol=1e-7),
]

GROUPS = {"vectors": VECTORS, "bfloat16": BFLOAT16, "packed": PACKED, "intrinsics": INTRINSICS, "floats": FLOATS}
RANDOM = Case("uniform_then_scale", uniform_then_scale, lambda r: [np.zeros(256, "float32"), np.zeros(256, "float32")],
              lambda a: [], outputs=2)


def module(cases: list[Case], main: str | None = None) -> tvm.IRModule:
    """One IRModule with every case's function under the case's name (and case `main` also as main)."""
    funcs = {c.name: c.func.with_attr("global_symbol", c.name) for c in cases}
    if main is not None:
        funcs["main"] = funcs[main].with_attr("global_symbol", "main")
    return tvm.IRModule(funcs)


def call(function, case: Case, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Call a built function on copies of the arrays; the outputs (trailing arguments) afterwards."""
    tensors = [tvm.runtime.tensor(np.array(a)) for a in arrays]
    function(*tensors)
    return [t.numpy() for t in tensors[-case.outputs:]]


def check(case: Case, arrays: list[np.ndarray], got: list[np.ndarray]) -> None:
    """Assert the outputs match the case's numpy reference (NaN where the reference has NaN)."""
    for value, want in zip(got, case.expected(arrays), strict=True):
        if want.dtype == BF16:
            value, want = value.astype("float32"), want.astype("float32")
        np.testing.assert_allclose(value, want, rtol=case.rtol, atol=case.atol, equal_nan=True)
