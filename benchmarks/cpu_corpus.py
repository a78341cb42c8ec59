"""The CPU kernels that benchmarks/cpu_kernels.py times: each a scheduled TIR function ("main").

Four groups, named by the prefix of each kernel's name:
- `hand/`: kernels scheduled here by hand the way CPU schedules look (an outer `parallel` loop, inner
  `vectorized` loops): elementwise math, matmul (rows; tiles with a local accumulator), reductions
  over rows, softmax, layer norm, an NCHW conv2d;
- `upstream/`: the constructs that TVM's own CPU codegen tests give `T.parallel` loops (a parallel
  loop fused with a vectorized one and a tail predicate, vectors over a non-innermost axis, parallel
  loops inside a serial loop, symbolic extents, allocations and while loops in a parallel body),
  written here at sizes worth timing;
- `dlight/`: the TIR functions of benchmarks/nn_models.py's models that dlight's CPU rules (GEMV,
  Reduction) schedule (cpu_schedules.py);
- `tuned/`: MetaSchedule candidates from the saved database (cpu_schedules.py).

`kernels(level)` lists them all for a CPU level (dlight asks the level's vector width). A kernel's
module is made only when it is built, so listing is cheap.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from cpu_kernel import Kernel


def _module(func: Any) -> Any:
    import tvm

    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def _schedule(func: Any) -> Any:
    from tvm import s_tir

    return s_tir.Schedule(_module(func))


# -- hand-scheduled kernels --------------------------------------------------------------------

def _gelu_tanh(x: Any) -> Any:
    from tvm import te

    return 0.5 * x * (1.0 + te.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _gelu_erf(x: Any) -> Any:
    from tvm import te

    return 0.5 * x * (1.0 + te.erf(x * (1.0 / math.sqrt(2.0))))


def _sqrt_exp(x: Any) -> Any:
    from tvm import te

    return te.sqrt(x * x + 1.0) * te.exp(x / 1000.0)


def _intrinsic(name: str) -> Callable[[Any], Any]:
    def expr(x: Any) -> Any:
        from tvm import te

        return getattr(te, name)(x)
    return expr


#: name -> (the expression of one float32 element, how its inputs are filled)
MATH: dict[str, tuple[Callable[[Any], Any], str]] = {
    "sqrt_exp": (_sqrt_exp, "normal"),
    "gelu_tanh": (_gelu_tanh, "normal"),
    "gelu_erf": (_gelu_erf, "normal"),
    "tanh": (_intrinsic("tanh"), "normal"),
    "sigmoid": (_intrinsic("sigmoid"), "normal"),
    "erf": (_intrinsic("erf"), "normal"),
    "log": (_intrinsic("log"), "positive"),
}


def elementwise(expr: Callable[[Any], Any], n: int, parallel: int = 64, lanes: int = 8) -> Any:
    """B[i] = expr(A[i]) over n floats: the outer loop split into `parallel` parallel chunks, each
    chunk's inner loop vectorized by `lanes` (0: left serial)."""
    from tvm import te

    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: expr(a[i]), name="B")
    sch = _schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    outer, inner = sch.split(i, [parallel, None])
    sch.parallel(outer)
    if lanes:
        sch.vectorize(sch.split(inner, [None, lanes])[1])
    return sch.mod


def matmul_rows(n: int = 1024, lanes: int = 8) -> Any:
    """C = A @ B (n^3 float32): rows in parallel, the loop order i, k, j, j vectorized by `lanes`."""
    import cpu_workloads

    sch = _schedule(cpu_workloads.matmul(n))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    jo, ji = sch.split(j, [None, lanes])
    sch.reorder(i, k, jo, ji)
    sch.parallel(i)
    sch.vectorize(ji)
    init = sch.decompose_reduction(block, k)   # after: the update alone is no reduction block
    sch.vectorize(sch.get_loops(init)[-1])
    return sch.mod


def matmul_tiled(n: int = 1024, tile: int = 32, kstep: int = 4, lanes: int = 8) -> Any:
    """C = A @ B in tile x tile blocks accumulated in a local buffer, tile rows in parallel, the
    inner loop order ko, ii, ki, ji with ji vectorized by `lanes`."""
    import cpu_workloads

    sch = _schedule(cpu_workloads.matmul(n))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, tile])
    jo, ji = sch.split(j, [None, tile])
    ko, ki = sch.split(k, [None, kstep])
    sch.reorder(io, jo, ko, ii, ki, ji)
    write = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(write, jo)
    sch.parallel(io)
    sch.vectorize(sch.split(ji, [None, lanes])[1])
    init = sch.decompose_reduction(block, ko)
    sch.vectorize(sch.split(sch.get_loops(init)[-1], [None, lanes])[1])
    sch.vectorize(sch.split(sch.get_loops(write)[-1], [None, lanes])[1])
    return sch.mod


def row_reduce(kind: str, rows: int = 2048, cols: int = 2048, rfactor: int = 0) -> Any:
    """B[i] = sum or max of A[i, :]: rows in parallel; with `rfactor`, each row reduced first into
    `rfactor` partial results across a vectorized loop."""
    from tvm import te

    a = te.placeholder((rows, cols), "float32", name="A")
    k = te.reduce_axis((0, cols), name="k")
    reduce = te.sum if kind == "sum" else te.max
    b = te.compute((rows,), lambda i: reduce(a[i, k], axis=k), name="B")
    sch = _schedule(te.create_prim_func([a, b]))
    block = sch.get_sblock("B")
    i, k = sch.get_loops(block)
    if rfactor:
        ko, ki = sch.split(k, [None, rfactor])
        partial = sch.rfactor(ki, 1)
        i2, ki2 = sch.get_loops(block)
        sch.compute_at(partial, i2)
        _, lane, step = sch.get_loops(partial)     # compute_at puts the partial sums' lane loop first
        sch.reorder(step, lane)
        sch.parallel(i2)
        sch.vectorize(lane)
        sch.vectorize(sch.get_loops(sch.decompose_reduction(partial, step))[-1])
    else:
        sch.parallel(i)
    return sch.mod


def _rows_in_parallel(sch: Any, blocks: list[str], lanes: int) -> Any:
    """Every block under the last block's row loop (made parallel), the elementwise blocks'
    inner loops vectorized by `lanes`."""
    last = sch.get_sblock(blocks[-1])
    row = sch.get_loops(last)[0]
    for name in reversed(blocks[:-1]):
        sch.compute_at(sch.get_sblock(name), row)
    sch.parallel(row)
    for name in blocks:
        block = sch.get_sblock(name)
        if sch.get(block).init is None and len(sch.get_loops(block)) > 1:   # elementwise, not a reduction
            sch.vectorize(sch.split(sch.get_loops(block)[-1], [None, lanes])[1])
    return sch.mod


def softmax(rows: int = 2048, cols: int = 1024, lanes: int = 8) -> Any:
    """Softmax over rows: each row in parallel, its exp and normalize vectorized."""
    import cpu_workloads

    sch = _schedule(cpu_workloads.softmax(rows, cols))
    return _rows_in_parallel(sch, ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"],
                             lanes)


def layer_norm(rows: int = 2048, cols: int = 1024, lanes: int = 8) -> Any:
    """Layer norm over rows (topi's: sum, mean, variance sum, normalize): rows in parallel."""
    from tvm import te, topi

    x = te.placeholder((rows, cols), "float32", name="X")
    gamma = te.placeholder((cols,), "float32", name="gamma")
    beta = te.placeholder((cols,), "float32", name="beta")
    func = te.create_prim_func([x, gamma, beta, topi.nn.layer_norm(x, gamma, beta, axis=[1], epsilon=1e-5)])
    return _rows_in_parallel(_schedule(func), ["X_sum", "X_mean", "X_var_sum", "T_layer_norm"], lanes)


def conv2d_nchw(cin: int = 64, cout: int = 64, size: int = 56, lanes: int = 8) -> Any:
    """A 3x3 NCHW convolution: output channels in parallel, the padding computed per row, the
    output row's width vectorized by `lanes` with the reduction loops outside it."""
    import cpu_workloads

    sch = _schedule(cpu_workloads.conv2d(1, cin, cout, size, 3))
    block = sch.get_sblock("conv2d_nchw")
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    xo, xi = sch.split(x, [None, lanes])
    sch.reorder(n, f, y, xo, rc, ry, rx, xi)
    sch.compute_inline(sch.get_sblock("pad_temp"))
    sch.parallel(sch.fuse(n, f))
    sch.vectorize(xi)
    sch.vectorize(sch.get_loops(sch.decompose_reduction(block, rc))[-1])
    return sch.mod


def _hand() -> list[Kernel]:
    out = [Kernel("hand/sqrt_exp_4m_par64", lambda: elementwise(MATH["sqrt_exp"][0], 1 << 22, lanes=0)),
           Kernel("hand/sqrt_exp_4m_par64_vec8", lambda: elementwise(MATH["sqrt_exp"][0], 1 << 22)),
           Kernel("hand/sqrt_exp_4m_par64_vec32", lambda: elementwise(MATH["sqrt_exp"][0], 1 << 22, lanes=32))]
    for name, (expr, fill) in MATH.items():
        if name != "sqrt_exp":
            out.append(Kernel(f"hand/{name}_1m_vec8", lambda e=expr: elementwise(e, 1 << 20), fill=fill))
    out += [Kernel("hand/matmul1024_rows_vec8", lambda: matmul_rows(1024, 8), rtol=1e-4),
            Kernel("hand/matmul1024_rows_vec16", lambda: matmul_rows(1024, 16), rtol=1e-4),
            Kernel("hand/matmul1024_tiled32", lambda: matmul_tiled(1024), rtol=1e-4),
            Kernel("hand/row_sum_2048", lambda: row_reduce("sum")),
            Kernel("hand/row_max_2048", lambda: row_reduce("max")),
            Kernel("hand/row_sum_2048_rfactor8", lambda: row_reduce("sum", rfactor=8)),
            Kernel("hand/row_sum_2048_rfactor32", lambda: row_reduce("sum", rfactor=32)),
            Kernel("hand/softmax_2048x1024", lambda: softmax()),
            Kernel("hand/layer_norm_2048x1024", lambda: layer_norm(), rtol=1e-3, atol=1e-4),
            Kernel("hand/conv2d_nchw_64x56_3x3", lambda: conv2d_nchw())]
    return out


# -- the constructs of TVM's own parallel-loop tests -------------------------------------------

def _upstream() -> list[Kernel]:
    import upstream_kernels as up

    return [Kernel("upstream/add_par_vec4_4m", up.add_parallel_vector),
            Kernel("upstream/flip_tail_4m", up.flip_with_tail, rtol=0, atol=0),
            Kernel("upstream/strided_vec4_1m", up.strided_vector, rtol=0, atol=0),
            Kernel("upstream/parallel_in_serial", up.parallel_in_serial),
            Kernel("upstream/symbolic_chunks", up.symbolic_chunks, sizes={"n": 1_000_003}),
            Kernel("upstream/alloc_in_parallel", up.alloc_in_parallel),
            Kernel("upstream/while_in_parallel", up.while_in_parallel)]


GROUPS = ("hand", "upstream", "dlight", "tuned")


def kernels(level: str | None, groups: tuple[str, ...] = GROUPS) -> list[Kernel]:
    """The kernels of the corpus's `groups` for a CPU level (None: the baseline). Listing dlight's
    builds the models' TIR (seconds); the others are made only when built."""
    import cpu_schedules

    makers = {"hand": _hand, "upstream": _upstream, "dlight": lambda: cpu_schedules.dlight_kernels(level),
              "tuned": cpu_schedules.tuned_kernels}
    return [k for g in GROUPS if g in groups for k in makers[g]()]
