"""A function of more C than LARGE_FUNCTION_BYTES (an explicitly unrolled tuning candidate) is compiled
with LARGE_FUNCTION_FLAGS by the compiler jitflow ships, and computes what numpy does."""
from __future__ import annotations

import kernels
import numpy as np
import pytest
import tvm

import jitflow
from jitflow.builder.host_c import compile as host_compile
from tvm.script import tirx as T


def unrolled_matmul(n: int = 128, lanes: int = 32, unroll: int = 512):
    """A matmul scheduled as MetaSchedule's unrolled candidates are: 32-lane vectors, 512 steps unrolled."""
    sch = tvm.s_tir.Schedule(kernels.matmul(n))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, lanes])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k0)
    sch.annotate(i0, "pragma_auto_unroll_max_step", unroll)
    sch.annotate(i0, "pragma_unroll_explicit", 1)
    return sch.mod


def test_the_large_function_flags_name_what_they_bound():
    flags = host_compile.LARGE_FUNCTION_FLAGS
    assert "-enable-misched=false" not in flags          # the scheduler stays: the code needs it
    assert "-dag-maps-huge-region=50" in flags and "-fno-slp-vectorize" in flags
    small = "int f(void) { return 0; }\n"
    assert host_compile.flags_for(small) == ()
    large = "int f(int* a) {\n" + "  a[0] += 1;\n" * (host_compile.LARGE_FUNCTION_BYTES // 12 + 1) + "  return 0;\n}\n"
    assert host_compile.flags_for(large) == flags


def test_inline_math_calls_count_for_more_than_their_text():
    """A softmax candidate's 30 KB function of 512 unrolled expf calls took clang 14.9 s without the flags."""
    def source(calls: int) -> str:
        return "float f(float* a) {\n  float s = 0.0f;\n" + "".join(
            f"  s += jitflow_expf(a[{k}]);\n" for k in range(calls)) + "  return s;\n}\n"

    few, many = source(20), source(host_compile.LARGE_FUNCTION_BYTES // host_compile.MATH_CALL_BYTES + 1)
    assert len(many) < host_compile.LARGE_FUNCTION_BYTES // 10
    assert host_compile.flags_for(few) == ()
    assert host_compile.flags_for(many) == host_compile.LARGE_FUNCTION_FLAGS
    not_math = many.replace("jitflow_expf(", "jitflow_chunk_end_int32(")    # other helpers count as text
    assert host_compile.flags_for(not_math) == ()


@T.prim_func
def unrolled_exp_sum(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.parallel(4):
        B[i] = T.float32(0)
        for k in T.unroll(256):
            B[i] = B[i] + T.exp(A[i, k])


def test_an_unrolled_exp_reduction_builds_with_them_and_matches_numpy(cache_dir):
    exe = jitflow.compile(tvm.IRModule({"main": unrolled_exp_sum}), "c")
    host_c = (exe.build().library.parent / "src" / "host.c").read_text()
    assert "jitflow_expf(" in host_c and host_compile.flags_for(host_c) == host_compile.LARGE_FUNCTION_FLAGS
    a = np.random.default_rng(0).standard_normal((4, 256)).astype("float32")
    b = tvm.runtime.tensor(np.zeros(4, "float32"))
    exe["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_allclose(b.numpy(), np.exp(a).sum(axis=1), rtol=1e-5)


@pytest.mark.slow
def test_an_unrolled_candidate_builds_with_them_and_matches_numpy(cache_dir):
    exe = jitflow.compile(unrolled_matmul(), "c")
    info = exe.build()
    host_c = (info.library.parent / "src" / "host.c").read_text()
    assert host_compile.flags_for(host_c) == host_compile.LARGE_FUNCTION_FLAGS
    a, b = np.random.rand(128, 128).astype("float32"), np.random.rand(128, 128).astype("float32")
    c = tvm.runtime.tensor(np.zeros((128, 128), "float32"))
    exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
