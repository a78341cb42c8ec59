"""Kernels with the `T.parallel` constructs that TVM's own CPU codegen and lowering tests exercise,
at sizes worth timing (benchmarks/cpu_kernels.py's `upstream/` group). Each function returns an
IRModule whose "main" is the kernel:

- add_parallel_vector: a parallel loop of a million small iterations, each a 4-lane vector;
- flip_with_tail: parallel x vectorized(4) with a predicate for the last partial vector, read
  backwards;
- strided_vector: a vectorized loop that is not the innermost (its lanes are a column's stride apart);
- parallel_in_serial: parallel loops inside a serial loop (a launch per outer iteration), after a
  serial pass that fills a temporary;
- symbolic_chunks: a symbolic length split into a fixed number of parallel chunks with a guard;
- alloc_in_parallel: a scratch buffer allocated in each parallel iteration;
- while_in_parallel: a while loop with a counter buffer in each parallel iteration.
"""
from __future__ import annotations

from typing import Any

from tvm.script import tirx as T

N4M = 1 << 22
N1M = 1 << 20


def _module(func: Any) -> Any:
    import tvm

    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def add_parallel_vector() -> Any:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((N4M,), "float32"), B: T.Buffer((N4M,), "float32"), C: T.Buffer((N4M,), "float32")):
        T.func_attr({"tirx.noalias": True})
        for outer in T.parallel(N4M // 4):
            for lane in T.vectorized(4):
                with T.sblock("C"):
                    v = T.axis.spatial(N4M, outer * 4 + lane)
                    C[v] = A[v] + B[v]
    return _module(main)


def flip_with_tail(n: int = N4M + 3, skip: int = 5) -> Any:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n + skip,), "float32"), C: T.Buffer((n,), "float32")):
        T.func_attr({"tirx.noalias": True})
        for outer in T.parallel((n + 3) // 4):
            for lane in T.vectorized(4):
                with T.sblock("C"):
                    v = T.axis.spatial(n, outer * 4 + lane)
                    T.where(outer * 4 + lane < n)
                    C[v] = A[n + skip - 1 - v]
    return _module(main)


def strided_vector(rows: int = N1M, cols: int = 3, skip: int = 2) -> Any:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((rows + skip, cols), "float32"), C: T.Buffer((rows, cols), "float32")):
        T.func_attr({"tirx.noalias": True})
        for outer in T.parallel(rows // 4):
            for lane in T.vectorized(4):
                for col in range(cols):
                    with T.sblock("C"):
                        vi = T.axis.spatial(rows, outer * 4 + lane)
                        vj = T.axis.spatial(cols, col)
                        C[vi, vj] = A[vi + skip, vj] + T.float32(1)
    return _module(main)


def parallel_in_serial(steps: int = 64, tasks: int = 16, chunk: int = 1024) -> Any:
    n = steps * tasks * chunk

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        T.func_attr({"tirx.noalias": True})
        B = T.sblock_alloc_buffer((n,))
        for i in range(n):
            with T.sblock("B"):
                v = T.axis.spatial(n, i)
                B[v] = A[v] * A[v] + T.float32(1)
        for step in range(steps):
            for task in T.parallel(tasks):
                for j in range(chunk):
                    with T.sblock("C"):
                        v = T.axis.spatial(n, (step * tasks + task) * chunk + j)
                        C[v] = T.sqrt(B[v]) * T.float32(2) + T.float32(2)
    return _module(main)


def symbolic_chunks(tasks: int = 16) -> Any:
    @T.prim_func(s_tir=True)
    def main(var_A: T.handle, var_C: T.handle):
        T.func_attr({"tirx.noalias": True})
        n = T.int32()
        A = T.match_buffer(var_A, (n,))
        C = T.match_buffer(var_C, (n,))
        B = T.sblock_alloc_buffer((n,))
        for i in range(n):
            with T.sblock("B"):
                v = T.axis.spatial(n, i)
                B[v] = A[v]
        for outer in T.parallel(tasks):
            for inner in range((n + tasks - 1) // tasks):
                with T.sblock("C"):
                    v = T.axis.spatial(n, outer * ((n + tasks - 1) // tasks) + inner)
                    T.where(outer * ((n + tasks - 1) // tasks) + inner < n)
                    C[v] = B[v] * T.float32(0.5) + T.float32(1)
    return _module(main)


def alloc_in_parallel(rows: int = 65536, cols: int = 64) -> Any:
    @T.prim_func
    def main(A: T.Buffer((rows, cols), "float32"), B: T.Buffer((rows, cols), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            scratch = T.decl_buffer((cols,), "float32")
            for j in range(cols):
                scratch[j] = A[i, j] * T.float32(2)
            for j in range(cols):
                B[i, j] = scratch[cols - 1 - j] + scratch[j]
    return _module(main)


def while_in_parallel(rows: int = 65536, cols: int = 64) -> Any:
    @T.prim_func
    def main(A: T.Buffer((rows, cols), "float32"), B: T.Buffer((rows,), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            k = T.decl_buffer((1,), "int32")
            acc = T.decl_buffer((1,), "float32")
            k[0] = 0
            acc[0] = T.float32(0)
            while k[0] < cols:
                acc[0] = acc[0] + A[i, k[0]] * A[i, k[0]]
                k[0] = k[0] + 1
            B[i] = acc[0]
    return _module(main)
