"""What clang does with the loops of tuned candidates, read from its own optimization remarks on the
host C jitflow writes (not timed: the run times are benchmarks/tuning_builds.py's): a buffer TVM
allocates from its workspace pool is memory nothing else points to, so accumulators in an argument
stay in registers across a reduction loop that reads a staged input (as TVM's LLVM host keeps them),
not stored on every step. The candidate also computes what numpy does."""
from __future__ import annotations

import re

import numpy as np
import tvm
from tvm.script import tirx as T

import jitflow
from jitflow.builder.steps import _include_dirs
from jitflow.targets import machine_host
from jitflow.toolchain.zig_cc import zig

REMARKS = ("-Rpass=licm",)


def conv2d_tiles(channels: int = 64, size: int = 56):
    """A 3x3 convolution scheduled as a tuned candidate was: the padded input of each parallel
    iteration in a workspace buffer, and 16 channels x 4 rows x 2 columns of the output (an argument)
    accumulated across the reduction loops around them."""
    from tvm import te, topi

    x = te.placeholder((1, channels, size, size), "float32", name="X")
    w = te.placeholder((channels, channels, 3, 3), "float32", name="W")
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)]))
    pad, conv = sch.get_sblock("pad_temp"), sch.get_sblock("conv2d_nchw")
    n, f, y, xx, rc, ry, rx = sch.get_loops(conv)
    f0, f1 = sch.split(f, [None, 16])
    y0, y1, y2 = sch.split(y, [None, 2, 4])
    x0, x1 = sch.split(xx, [None, 2])
    rc0, rc1 = sch.split(rc, [None, 32])
    sch.reorder(n, f0, x0, y0, rc0, ry, y1, rc1, rx, f1, y2, x1)
    outer = sch.fuse(n, f0, x0)
    sch.parallel(outer)
    sch.compute_at(pad, outer)
    sch.vectorize(x1)
    sch.annotate(outer, "pragma_auto_unroll_max_step", 64)
    sch.annotate(outer, "pragma_unroll_explicit", 1)
    sch.decompose_reduction(conv, y0)
    return tvm.IRModule({"main": sch.mod["main"]})


def _remarks(exe, tmp_path, zig_cache, flags: tuple[str, ...] = REMARKS) -> tuple[list[str], list[str]]:
    """clang's remarks on the library's host C, compiled again as jitflow compiles it, and the C."""
    text = (exe.build().library.parent / "src" / "host.c").read_text()
    copy = tmp_path / "host.c"
    copy.write_text(text)
    job = zig.compile_object(copy, tmp_path / "host.o", _include_dirs(), machine_host(), zig_cache,
                             tmp_path / "zig-local", extra=flags)
    return [line for line in job.wait().splitlines() if "remark:" in line], text.splitlines()


def _at(remarks: list[str], lines: list[str], remark: str, code: str) -> int:
    """How many of `remarks` say `remark` of a line of the C that holds `code`."""
    found = (re.match(r"host\.c:(\d+):\d+: remark: (.*)", r) for r in remarks)
    return sum(1 for m in found if m and remark in m[2] and code in lines[int(m[1]) - 1])


def test_accumulators_in_an_argument_stay_in_registers_beside_a_workspace(cache_dir, tmp_path, zig_cache):
    exe = jitflow.compile(conv2d_tiles(), "c")
    remarks, lines = _remarks(exe, tmp_path, zig_cache)
    assert any("TVMBackendAllocWorkspace" in line for line in lines)
    moved = _at(remarks, lines, "Moving accesses to memory location out of the loop", "*(float2*)(conv2d_nchw + ")
    assert moved == 16 * 4, remarks          # every accumulator's store leaves the reduction loop
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 64, 56, 56)).astype("float32"), rng.standard_normal((64, 64, 3, 3)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((1, 64, 56, 56), "float32"))
    exe["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w), out)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x[0], ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
    np.testing.assert_allclose(out.numpy()[0], np.einsum("cyxij,fcij->fyx", windows, w), rtol=1e-3, atol=1e-3)


@T.prim_func
def column_tiles(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                 C: T.Buffer((64, 64), "float32")):
    """A tuned matmul's shape: 32 accumulators of a column, a loop over them inside the reduction."""
    for i0 in T.parallel(2):
        for j in range(64):
            for i in range(32):
                C[i0 * 32 + i, j] = T.float32(0)
            for k in range(64):
                for i in range(32):
                    C[i0 * 32 + i, j] = C[i0 * 32 + i, j] + A[i0 * 32 + i, k] * B[k, j]


def test_a_tile_of_accumulators_inside_a_reduction_stays_in_registers(cache_dir, tmp_path, zig_cache):
    """The 32-step loop is unrolled (LLVM's -O3 does, clang's -O2 did not: 4.4x LLVM's time on a
    512^3 candidate), and each accumulator's store then leaves the reduction loop."""
    exe = jitflow.compile(tvm.IRModule({"main": column_tiles}), "c")
    remarks, lines = _remarks(exe, tmp_path, zig_cache)
    moved = _at(remarks, lines, "Moving accesses to memory location out of the loop", "C[")
    assert moved == 32, remarks
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64)).astype("float32"), rng.standard_normal((64, 64)).astype("float32")
    c = tvm.runtime.tensor(np.zeros((64, 64), "float32"))
    exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@T.prim_func
def row_squares(A: T.Buffer((256, 64), "float32"), B: T.Buffer((256,), "float32")):
    """A sum of squares over each row by a while loop with a counter, rows in parallel (the construct of
    TVM's own test of while loops in parallel bodies)."""
    T.func_attr({"tirx.noalias": True})
    for i in T.parallel(256):
        k = T.decl_buffer((1,), "int32")
        acc = T.decl_buffer((1,), "float32")
        k[0] = 0
        acc[0] = T.float32(0)
        while k[0] < 64:
            acc[0] = acc[0] + A[i, k[0]] * A[i, k[0]]
            k[0] = k[0] + 1
        B[i] = acc[0]


def test_a_while_loop_is_unrolled_as_a_for_loop_would_be(cache_dir, tmp_path, zig_cache):
    """TVM's printer writes `#pragma unroll 1` before a while loop; TVM's LLVM host gives LLVM no such
    limit (it unrolls this one whole), so the C host leaves it out and clang unrolls the loop."""
    exe = jitflow.compile(tvm.IRModule({"main": row_squares}), "c")
    remarks, lines = _remarks(exe, tmp_path, zig_cache, ("-Rpass=loop-unroll",))
    assert not any("#pragma unroll 1" in line for line in lines)
    unrolled = _at(remarks, lines, "unrolled loop", "while (1)") + _at(remarks, lines, "unrolled loop", "k_ptr[0] < 64")
    assert unrolled >= 1, remarks
    a = np.random.default_rng(0).standard_normal((256, 64)).astype("float32")
    b = tvm.runtime.tensor(np.zeros(256, "float32"))
    exe["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_allclose(b.numpy(), (a.astype("float64") ** 2).sum(axis=1), rtol=1e-5)
