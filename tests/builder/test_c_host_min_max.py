"""A min or max that reads memory, computed by the built library as numpy does, where TVM's C printer
alone reused an operand read before a store to the same place (an unrolled max reduction kept only
its last step: jitflow gave [1, 3, -1, 0] where the maxima are [5, 3, 7, 0])."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T

import jitflow


@T.prim_func
def max_in_steps(A: T.Buffer((4, 2), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.float32(-100.0)
        B[i] = T.max(B[i], A[i, 0])
        B[i] = T.max(B[i], A[i, 1])


@T.prim_func
def unrolled_min(A: T.Buffer((8, 16), "int32"), B: T.Buffer((8,), "int32")):
    for i in T.parallel(8):
        B[i] = 1 << 30
        for k in T.unroll(16):
            B[i] = T.min(B[i], A[i, k])


@T.prim_func
def vector_max(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(16):
        for j in T.vectorized(4):
            C[i * 4 + j] = T.float32(-100.0)
        for j in T.vectorized(4):
            C[i * 4 + j] = T.max(C[i * 4 + j], A[i * 4 + j])
        for j in T.vectorized(4):
            C[i * 4 + j] = T.max(C[i * 4 + j], B[i * 4 + j])


def _built(func):
    exe = jitflow.compile(tvm.IRModule({"main": func}), "c")
    host_c = (exe.build().library.parent / "src" / "host.c").read_text()
    return exe, host_c


def _inputs(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    """The inputs of a kernel above and what numpy says its output is."""
    rng = np.random.default_rng(0)
    if name == "max_in_steps":
        a = np.array([[5, 1], [2, 3], [7, -1], [0, 0]], "float32")
        return [a], a.max(axis=1)
    if name == "unrolled_min":
        a = rng.integers(-1000, 1000, (8, 16)).astype("int32")
        return [a], a.min(axis=1)
    a, b = rng.standard_normal(64).astype("float32"), rng.standard_normal(64).astype("float32")
    return [a, b], np.maximum(a, b)


#: kernel -> (its function, the helper its host C calls)
KERNELS = {"max_in_steps": (max_in_steps, "jitflow_max_float("), "unrolled_min": (unrolled_min, "jitflow_min_int32_t("),
           "vector_max": (vector_max, "jitflow_max_float_x4(")}


@pytest.mark.parametrize("name", KERNELS)
def test_every_step_of_a_reduction_counts(cache_dir, name):
    func, helper = KERNELS[name]
    exe, host_c = _built(func)
    assert helper in host_c
    inputs, expected = _inputs(name)
    out = tvm.runtime.tensor(np.zeros_like(expected))
    exe["main"](*[tvm.runtime.tensor(x) for x in inputs], out)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0])
def test_special_values_follow_tvms_llvm_host(cache_dir, value):
    """TVM's LLVM host selects on >: a NaN in the running value gives way to the next operand."""
    exe, _ = _built(max_in_steps)
    a = np.array([[value, 1], [2, value], [value, value], [0, -0.0]], "float32")
    ours, theirs = (tvm.runtime.tensor(np.zeros(4, "float32")) for _ in range(2))
    exe["main"](tvm.runtime.tensor(a), ours)
    tvm.compile(tvm.IRModule({"main": max_in_steps}), "llvm")["main"](tvm.runtime.tensor(a), theirs)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert np.array_equal(np.signbit(ours.numpy()), np.signbit(theirs.numpy()))
