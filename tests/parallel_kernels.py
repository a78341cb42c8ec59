"""Kernels with parallel loops, shared by tests/builder/test_parallel.py and the processes it starts.

Each is a TIR function with `T.parallel` loops (TVM's thread pool runs them); `module()` puts them in
one IRModule under their names.
"""
from __future__ import annotations

import tvm
from tvm.script import tirx as T

ROWS, COLS = 37, 24      # rows do not divide among 2 or 3 tasks evenly


@T.prim_func
def rows(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32")):
    """B = sqrt(A * A + 1) * exp(A / 1000), rows in parallel, columns vectorized."""
    T.func_attr({"tirx.noalias": True})
    for i in T.parallel(ROWS):
        for j in T.vectorized(COLS):
            B[i, j] = T.sqrt(A[i, j] * A[i, j] + T.float32(1)) * T.exp(A[i, j] / T.float32(1000))


@T.prim_func
def row_sums(A: T.Buffer((ROWS, COLS), "float32"), S: T.Buffer((ROWS,), "float32")):
    """S = A.sum(axis=1): a reduction per row, rows in parallel."""
    for i in T.parallel(ROWS):
        S[i] = T.float32(0)
        for k in range(COLS):
            S[i] = S[i] + A[i, k]


@T.prim_func
def several(A: T.Buffer((ROWS,), "float32"), B: T.Buffer((ROWS,), "float32"), C: T.Buffer((ROWS,), "float32")):
    """Two launches in one function, the second reading the first's result in reverse; a serial loop
    between them."""
    for i in T.parallel(ROWS):
        B[i] = A[i] * T.float32(2)
    for i in range(ROWS):
        C[i] = T.float32(1)
    for i in T.parallel(ROWS):
        C[i] = C[i] + B[ROWS - 1 - i]


@T.prim_func
def in_serial(A: T.Buffer((ROWS,), "float32"), B: T.Buffer((ROWS,), "float32")):
    """A launch per step of a serial loop: B = A + 0 + 1 + 2 + 3, each step on the pool."""
    for i in range(ROWS):
        B[i] = A[i]
    for step in range(4):
        for i in T.parallel(ROWS):
            B[i] = B[i] + T.Cast("float32", step)


@T.prim_func
def symbolic(a: T.handle, b: T.handle):
    """B = A * 3 over a symbolic length n, int64 loops."""
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in T.parallel(n):
        B[i] = A[i] * T.float32(3)


@T.prim_func
def launch_point(A: T.Buffer((ROWS,), "float32"), B: T.Buffer((ROWS,), "float32"),
                  C: T.Buffer((ROWS,), "float32")):
    """One launch, two loops: B = A + 1 in chunks, a barrier, then C[i] = B[n - 1 - i] in strides
    (each task reads what others wrote: wrong without the barrier)."""
    with T.attr(0, "pragma_parallel_launch_point", 1):
        with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
            for i in T.parallel(ROWS):
                B[i] = A[i] + T.float32(1)
        with T.attr(0, "pragma_parallel_stride_pattern", 1):
            for i in T.parallel(ROWS):
                C[i] = B[ROWS - 1 - i]


@T.prim_func
def repeated(A: T.Buffer((ROWS,), "float32"), B: T.Buffer((ROWS,), "float32")):
    """One launch whose loop runs three times, inside a serial loop: B = A + 3 (each pass adds A + 1
    to what the passes before it wrote, after a barrier)."""
    with T.attr(0, "pragma_parallel_launch_point", 1):
        for step in range(3):
            with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
                for i in T.parallel(ROWS):
                    B[i] = T.if_then_else(step == 0, A[i], B[i]) + T.float32(1)


@T.prim_func
def scalars(A: T.Buffer((ROWS,), "float32"), h: T.float16, flag: T.bool, k: T.int8):
    """A = (h if flag else 2) + k: scalar arguments of C types the closure must carry (half, bool,
    int8)."""
    for i in T.parallel(ROWS):
        A[i] = T.Select(flag, T.Cast("float32", h), T.float32(2)) + T.Cast("float32", k)


KERNELS = {"rows": rows, "row_sums": row_sums, "several": several, "in_serial": in_serial,
           "symbolic": symbolic, "launch_point": launch_point, "repeated": repeated,
           "scalars": scalars}


def module() -> tvm.IRModule:
    """Every kernel above, under its name."""
    return tvm.IRModule({name: f.with_attr("global_symbol", name) for name, f in KERNELS.items()})
