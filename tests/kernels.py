"""Modules the tests build: written once here so that test files and subprocesses share them."""
from __future__ import annotations

import tvm
from tvm.script import tirx as T


def vecadd(n: int = 1024, dtype: str = "float32"):
    """C = A + B over n elements, unscheduled (for the 'c' target)."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), dtype), B: T.Buffer((n,), dtype), C: T.Buffer((n,), dtype)):
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = A[vi] + B[vi]

    return tvm.IRModule({"main": main})


def axpb(scale: float = 2.0, n: int = 64):
    """C = A * scale + 1: the constant is part of the IR."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = A[vi] * T.float32(scale) + T.float32(1)

    return tvm.IRModule({"main": main})


def vecadd_cuda(n: int = 1024, threads: int = 128, dtype: str = "float32"):
    """vecadd split into blocks of `threads` and bound to the GPU."""
    sch = tvm.s_tir.Schedule(vecadd(n, dtype))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def matmul(n: int = 128):
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return tvm.IRModule({"main": main})


def matmul_shared(n: int = 256, tile: int = 16):
    """A tiled matmul that stages tiles of A and B through shared memory."""
    sch = tvm.s_tir.Schedule(matmul(n))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, tile])
    bj, tj = sch.split(j, [None, tile])
    ko, ki = sch.split(k, [None, tile])
    sch.reorder(bi, bj, ti, tj, ko, ki)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    for index in (0, 1):
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, tile, tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def libm_calls(n: int = 64):
    """C = exp(A) + log(A) + A ** 1.5 (A > 0): host C that calls the float32 exp, log and pow."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = T.exp(A[vi]) + T.log(A[vi]) + T.pow(A[vi], T.float32(1.5))

    return tvm.IRModule({"main": main})


def libm_calls_f64(n: int = 64):
    """libm_calls in float64: host C that calls exp, log and pow from libm (float32 math is the C host's
    own, docs/c_host.md)."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float64"), C: T.Buffer((n,), "float64")):
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = T.exp(A[vi]) + T.log(A[vi]) + T.pow(A[vi], T.float64(1.5))

    return tvm.IRModule({"main": main})


def sigmoid(n: int = 64):
    """C = sigmoid(A): the module names no exp; TVM legalizes sigmoid into one while lowering."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = T.sigmoid(A[vi])

    return tvm.IRModule({"main": main})


def chain(n: int = 1024):
    """D = (A * 2 + 1) * 3 in three stages through two temporaries, B and C: TVM's storage rewrite
    lets C reuse B's memory (one allocation), or not with tirx.disable_storage_rewrite (two)."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n,), "float32"), D: T.Buffer((n,), "float32")):
        B = T.sblock_alloc_buffer((n,), "float32")
        C = T.sblock_alloc_buffer((n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = B[vi] + T.float32(1)
        for i in range(n):
            with T.sblock("D"):
                vi = T.axis.spatial(n, i)
                D[vi] = C[vi] * T.float32(3)

    return main
