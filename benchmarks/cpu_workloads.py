"""Unscheduled CPU workloads (TIR from te): what MetaSchedule tunes for benchmarks/cpu_kernels.py.

`WORKLOADS` maps a name to a function that returns the workload's PrimFunc. The tuning script
(benchmarks/cpu_tune_db.py) tunes them into the saved database under benchmarks/data/, and the
benchmark finds each workload's records there by the PrimFunc's structure, so a change here makes
the saved records stale (the benchmark then says the workload has no records: tune again).
"""
from __future__ import annotations

from typing import Any, Callable


def matmul(n: int, m: int | None = None, k: int | None = None) -> Any:
    """C[i, j] = sum_k A[i, k] * B[k, j] in float32 (n x k times k x m)."""
    from tvm import te

    m, k = m or n, k or n
    a = te.placeholder((n, k), "float32", name="A")
    b = te.placeholder((k, m), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def conv2d(batch: int = 1, cin: int = 64, cout: int = 64, size: int = 56, kernel: int = 3) -> Any:
    """A padded NCHW convolution (stride 1), as topi writes it."""
    from tvm import te, topi

    x = te.placeholder((batch, cin, size, size), "float32", name="X")
    w = te.placeholder((cout, cin, kernel, kernel), "float32", name="W")
    y = topi.nn.conv2d_nchw(x, w, 1, kernel // 2, 1)
    return te.create_prim_func([x, w, y])


def softmax(rows: int = 256, cols: int = 1024) -> Any:
    """Softmax over the last axis, as topi writes it (max, exp, sum, divide)."""
    from tvm import te, topi

    x = te.placeholder((rows, cols), "float32", name="X")
    return te.create_prim_func([x, topi.nn.softmax(x, axis=-1)])


#: name -> the workload's PrimFunc
WORKLOADS: dict[str, Callable[[], Any]] = {
    "matmul128": lambda: matmul(128),
    "matmul512": lambda: matmul(512),
    "conv2d_64x56": lambda: conv2d(),
    "softmax_256x1024": lambda: softmax(),
}


def module(name: str) -> Any:
    """The workload as the IRModule MetaSchedule tunes (one function, "main")."""
    import tvm

    return tvm.IRModule({"main": WORKLOADS[name]().with_attr("global_symbol", "main")})
