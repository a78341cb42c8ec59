"""Which loops of the host IR are unrolled whole before printing (host_c/unroll.py), and that the
copies' bindings print as C that compiles and computes what numpy does."""
from __future__ import annotations

import numpy as np
import tvm
import tvm_ffi
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c.unroll import MAX_STEPS, unroll_module


def _loops(func) -> list[str]:
    found: list[str] = []
    tvm_ffi.structural_walk(func.body, [(tvm.tirx.For, lambda n: found.append(n.loop_var.name))], order="pre")
    return found


def _after(func) -> list[str]:
    return _loops(unroll_module(tvm.IRModule({"main": func}))["main"])


@T.prim_func
def reduction(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        B[i] = T.float32(0)
        for k in range(16):
            x = T.bind(A[i, k] * T.float32(2))
            B[i] = B[i] + x


@T.prim_func
def too_long(A: T.Buffer((64, MAX_STEPS + 1), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        for k in range(MAX_STEPS + 1):
            B[i] = B[i] + A[i, k]


@T.prim_func
def moves_with_both(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64, 16), "float32")):
    for i in range(64):
        for k in range(16):
            B[i, k] = A[i, k] + T.float32(1)


@T.prim_func
def with_a_branch(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        for k in range(16):
            if A[i, k] > T.float32(0):
                B[i] = B[i] + A[i, k]


@T.prim_func
def temporaries(A: T.Buffer((64, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(64):
        for k in range(16):
            B[k] = A[i, k] * T.float32(2)       # a scratch row each step of i: nothing to keep in registers
        C[i] = B[0]


@T.prim_func
def tile_of_accumulators(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                         C: T.Buffer((64, 64), "float32")):
    for j in range(64):
        for k in range(64):
            for i in range(16):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]


@T.prim_func
def wide_vector_sum(A: T.Buffer((131072,), "float32"), B: T.Buffer((2048,), "float32")):
    for i in range(64):
        for k in range(64):
            B[T.Ramp(i * 32, 1, 32)] = B[T.Ramp(i * 32, 1, 32)] + A[T.Ramp(i * 2048 + k * 32, 1, 32)]


@T.prim_func
def narrow_vector_sum(A: T.Buffer((16384,), "float32"), B: T.Buffer((512,), "float32")):
    for i in range(64):
        for k in range(32):
            B[T.Ramp(i * 8, 1, 8)] = B[T.Ramp(i * 8, 1, 8)] + A[T.Ramp(i * 256 + k * 8, 1, 8)]


@T.prim_func
def marked_by_tvm(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        for k in T.unroll(16):
            B[i] = B[i] + A[i, k]


def test_a_small_reduction_is_unrolled_and_its_bindings_renamed(cache_dir):
    assert _loops(reduction) == ["i", "k"]
    assert "k" not in _after(reduction)
    exe = jitflow.compile(tvm.IRModule({"main": reduction}), "c")
    host_c = (exe.build().library.parent / "src" / "host.c").read_text()
    assert "for (int32_t k" not in host_c and "x_15 = " in host_c
    a = np.random.default_rng(0).standard_normal((64, 16)).astype("float32")
    b = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_allclose(b.numpy(), (2 * a).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_long_moving_branching_scratch_wide_and_tvm_marked_loops_are_left():
    for func in (too_long, moves_with_both, with_a_branch, temporaries, wide_vector_sum):
        assert "k" in _after(func), func
    assert _after(tile_of_accumulators) == ["j", "k"] and _after(narrow_vector_sum) == ["i"]
    mod = tvm.IRModule({"main": too_long})
    assert unroll_module(mod).same_as(mod)          # nothing to do: the module itself comes back
    kinds: list[int] = []
    tvm_ffi.structural_walk(marked_by_tvm.body, [(tvm.tirx.For, lambda n: kinds.append(n.kind))], order="pre")
    assert tvm.tirx.ForKind.UNROLLED in kinds
    after: list[int] = []
    tvm_ffi.structural_walk(unroll_module(tvm.IRModule({"main": marked_by_tvm}))["main"].body,
                            [(tvm.tirx.For, lambda n: after.append(n.kind))], order="pre")
    assert after == kinds                            # a hint TVM's LLVM host ignores stays a hint
