"""Parallel loops run on TVM's thread pool, as TVM's LLVM host runs them: every result against numpy,
the launches as `inspect` reads them from the host C, the thread counts TVM_NUM_THREADS sets (in
fresh processes, which also load the exported library with jitflow.load, tvm.runtime.load_module
and a TVM without its compiler), errors raised in a body, what LLVM refuses, a Relax model, and
libraries the same byte for byte when rebuilt."""
from __future__ import annotations

import json

import numpy as np
import parallel_kernels as pk
import pytest
import tvm
from conftest import module_cache, run_python
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c import split
from jitflow.errors import HostCodeError


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """The kernels as one library (built once) and its report."""
    with module_cache(tmp_path_factory, zig_cache, "parallel-cache"):
        exe = jitflow.compile(pk.module(), "c")
        yield exe, exe.inspect()


def _run(exe, name, *arrays):
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    exe[name](*tensors)
    return [t.numpy() for t in tensors]


def _launches(rep, function):
    return [(x.name, [(p.var, p.extent.text, p.schedule) for p in x.loops], x.barriers)
            for x in rep.parallel if x.function == function]


def test_results_match_numpy(built):
    exe, rep = built
    assert {x.function for x in rep.parallel} == set(pk.KERNELS)         # each runs on the pool
    rng = np.random.default_rng(0)
    a = rng.standard_normal((pk.ROWS, pk.COLS)).astype("float32")
    v = rng.standard_normal(pk.ROWS).astype("float32")
    _, b = _run(exe, "rows", a, np.zeros_like(a))
    np.testing.assert_allclose(b, np.sqrt(a * a + 1) * np.exp(a / 1000), rtol=1e-5)
    _, s = _run(exe, "row_sums", a, np.zeros(pk.ROWS, "float32"))
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    _, b, c = _run(exe, "several", v, np.zeros_like(v), np.zeros_like(v))
    np.testing.assert_allclose(b, v * 2, rtol=1e-6)
    np.testing.assert_allclose(c, 1 + (v * 2)[::-1], rtol=1e-6)
    _, b = _run(exe, "in_serial", v, np.zeros_like(v))
    np.testing.assert_allclose(b, v + 6, rtol=1e-6)
    for n in (0, 1, 7, 1001):
        x = rng.standard_normal(n).astype("float32")
        _, y = _run(exe, "symbolic", x, np.zeros_like(x))
        np.testing.assert_allclose(y, x * 3, rtol=1e-6)
    _, b, c = _run(exe, "launch_point", v, np.zeros_like(v), np.zeros_like(v))
    np.testing.assert_allclose(b, v + 1, rtol=1e-6)
    np.testing.assert_allclose(c, (v + 1)[::-1], rtol=1e-6)
    for flag, expected in ((True, 1.5 - 3), (False, 2 - 3)):
        out = tvm.runtime.tensor(np.zeros(pk.ROWS, "float32"))
        exe["scalars"](out, 1.5, flag, -3)
        np.testing.assert_array_equal(out.numpy(), np.full(pk.ROWS, expected, "float32"))


def test_inspect_shows_each_launch_at_its_line(built):
    _, rep = built
    assert _launches(rep, "rows") == [("rows_0", [("i", str(pk.ROWS), "chunks")], 0)]
    assert _launches(rep, "row_sums") == [("row_sums_0", [("i", str(pk.ROWS), "chunks")], 0)]
    assert _launches(rep, "several") == [(f"several_{k}", [("i", str(pk.ROWS), "chunks")], 0) for k in (0, 1)]
    assert _launches(rep, "in_serial") == [("in_serial_0", [("i", str(pk.ROWS), "chunks")], 0)]
    assert _launches(rep, "symbolic") == [("symbolic_0", [("i", "n", "chunks")], 0)]
    assert _launches(rep, "scalars") == [("scalars_0", [("i", str(pk.ROWS), "chunks")], 0)]
    assert _launches(rep, "launch_point") == [("launch_point_0", [("i", str(pk.ROWS), "chunks"),
                                                                  ("i_1", str(pk.ROWS), "stride")], 1)]
    assert _launches(rep, "repeated") == [("repeated_0", [("i", str(pk.ROWS), "chunks")], 1)]
    by_name = {f.name: f for f in rep.functions}
    for x in rep.parallel:
        assert f"jitflow_launch_{x.name}(" in rep.host_line(x.line)
        assert rep.host_line(x.body_line).startswith(f"int32_t {x.body}(int32_t task_id, int32_t num_task, ")
        host = by_name[x.function]                                     # the body is part of its function
        assert host.line <= x.line < x.body_line < host.end_line
    at = [x.name for x in rep.parallel].index("symbolic_0")
    assert rep.evaluate(n=96).parallel[at].loops[0].extent.value == 96
    text = str(rep)
    line = next(x.line for x in rep.parallel if x.name == "launch_point_0")
    said = f"parallel i < {pk.ROWS} (chunks), i_1 < {pk.ROWS} (stride), 1 barrier on TVM's thread pool"
    assert f"{line:>5}  {said}" in text
    again = jitflow.report.Report.from_json(rep.to_json())
    assert again == rep and again.parallel == rep.parallel


def _dynamic_symbols(path):
    """(defined, undefined) names of a shared library's dynamic symbols."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        symbols = [(s.name, s["st_shndx"]) for s in ELFFile(f).get_section_by_name(".dynsym").iter_symbols() if s.name]
    return {n for n, at in symbols if at != "SHN_UNDEF"}, {n for n, at in symbols if at == "SHN_UNDEF"}


def test_the_library_needs_only_tvms_runtime_and_keeps_its_bodies_hidden(built):
    import tvm_ffi.libinfo
    from portability import PORTABLE_NEEDED

    from jitflow.formats import elf
    from jitflow.runtime import tvm_runtime

    exe, rep = built
    info = elf.read(exe.build_info.library)
    assert set(info.needed) <= PORTABLE_NEEDED                        # loads on glibc 2.17
    assert info.glibc_baseline is None or tuple(map(int, info.glibc_baseline.split("."))) <= (2, 17)
    defined, undefined = _dynamic_symbols(exe.build_info.library)
    runtime = _dynamic_symbols(tvm_runtime.lib_folder() / tvm_runtime.RUNTIME)[0] \
        | _dynamic_symbols(tvm_ffi.libinfo.find_libtvm_ffi())[0]
    assert {"TVMBackendParallelLaunch", "TVMFFIEnvGetStream", "TVMFFIEnvSetStream"} <= undefined
    assert {n for n in undefined if n.startswith("TVM")} <= runtime
    # libm's, the barrier's yield, the launcher's zeroing of its claim counts
    assert {n for n in undefined if not n.startswith("TVM")} <= {"expf", "sqrtf", "sched_yield", "memset"}
    assert not [n for n in defined if n.startswith("jitflow_")] and "__tvm_ffi_launch_point" in defined
    header = rep.host_line(next(x.body_line for x in rep.parallel if x.name == "rows_0"))
    assert "float* restrict A" in header and "float* restrict B" in header          # tirx.noalias
    header = rep.host_line(next(x.body_line for x in rep.parallel if x.name == "row_sums_0"))
    assert "restrict" not in header                                                   # no promise


def test_the_host_c_compiled_in_pieces_matches_numpy(tmp_path, monkeypatch):
    import io

    from jitflow import config
    from jitflow.builder import progress, steps
    from jitflow.builder.host_c import compile as host_compile
    from jitflow.options import BuildOptions, InProcess
    from jitflow.runtime.load import load_library
    from jitflow.targets import resolve_target

    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "3")
    monkeypatch.setattr(host_compile, "MIN_PIECE_BYTES", 1000)       # pieces of a small module
    said = progress.Progress("parallel", stream=io.StringIO(), mode="off")
    steps.build_into(tmp_path, pk.module(), resolve_target("c"), config.resolve(cache_dir=tmp_path / "unused"),
                     BuildOptions(), InProcess(), {}, said)
    assert "compiling the host C in 3 pieces (3 done)" in said.said
    assert all("TVMBackendParallelLaunch" in p for p in split.split((tmp_path / "src" / "host.c").read_text(), 3))
    lib = load_library(tmp_path / "lib.so")
    v = np.random.default_rng(6).standard_normal(pk.ROWS).astype("float32")
    _, b, c = _run(lib, "launch_point", v, np.zeros_like(v), np.zeros_like(v))
    np.testing.assert_allclose(c, (v + 1)[::-1], rtol=1e-6)
    _, b, c = _run(lib, "several", v, np.zeros_like(v), np.zeros_like(v))
    np.testing.assert_allclose(c, 1 + (v * 2)[::-1], rtol=1e-6)


def test_the_entries_of_a_kernel_stay_shared(cache_dir):
    # the entries of a kernel with parallel loops are those of the same kernel without them
    serial = tvm.IRModule({"main": pk.rows.with_attr("global_symbol", "main").with_body(
        _serial(pk.rows.body))})
    texts = []
    for mod in (serial, tvm.IRModule({"main": pk.rows.with_attr("global_symbol", "main")})):
        one = jitflow.compile(mod, "c")
        one.build()
        texts.append((one.build_info.library.parent / "src" / "host.c").read_text())
    assert "jitflow_launch_main_0" in texts[1] and "jitflow_launch_" not in texts[0]
    assert split.split_entries(texts[0])[0] == split.split_entries(texts[1])[0]


def _serial(body):
    import tvm_ffi

    def loop(node, mutator):
        node = mutator.default_mutate(node)
        return tvm.tirx.For(node.loop_var, node.min, node.extent, tvm.tirx.ForKind.SERIAL, node.body) \
            if node.kind == tvm.tirx.ForKind.PARALLEL else node

    return tvm_ffi.structural_mutate(body, [(tvm.tirx.For, loop)])


# -- what LLVM's host refuses -----------------------------------------------------------------

@T.prim_func
def _nested(A: T.Buffer((8, 8), "float32")):
    for i in T.parallel(8):
        for j in T.parallel(8):
            A[i, j] = T.float32(1)


@T.prim_func
def _barrier_in_loop(A: T.Buffer((8,), "float32")):
    with T.attr(0, "pragma_parallel_launch_point", 1):
        for i in T.parallel(8):
            with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
                A[i] = T.float32(1)


@T.prim_func
def _stride_outside(A: T.Buffer((8,), "float32")):
    with T.attr(0, "pragma_parallel_stride_pattern", 1):
        for i in T.parallel(8):
            A[i] = T.float32(1)


@T.prim_func
def _empty_launch(A: T.Buffer((8,), "float32")):
    with T.attr(0, "pragma_parallel_launch_point", 1):
        for i in range(8):
            A[i] = T.float32(1)


@pytest.mark.parametrize("func, reason", [
    (_nested, "a parallel loop over j inside another parallel loop"),
    (_barrier_in_loop, "pragma_parallel_barrier_when_finish inside a parallel loop"),
    (_stride_outside, "pragma_parallel_stride_pattern outside a parallel launch"),
    (_empty_launch, "pragma_parallel_launch_point without a parallel loop"),
], ids=["nested", "barrier-in-loop", "stride-outside", "empty-launch"])
def test_what_llvm_refuses_is_a_host_code_error(cache_dir, func, reason):
    with pytest.raises(Exception):
        tvm.compile(func, target="llvm")              # TVM's LLVM host refuses it too
    with pytest.raises(HostCodeError, match=reason) as caught:
        jitflow.compile(func, "c").build()
    assert caught.value.functions == ["main"]


def test_loops_the_pool_cannot_share_are_refused():
    """A parallel loop that does not start at 0 (TVM's lowering makes them start at 0; the pass
    checks it as LLVM's host does)."""
    @T.prim_func
    def offset(A: T.Buffer((16,), "float32")):
        for i in T.parallel(2, 10):
            A[i] = T.float32(1)

    from jitflow.builder.host_c import parallel

    with pytest.raises(HostCodeError, match="starts at 2, not 0"):
        parallel.parallelize_module(tvm.IRModule({"main": offset}), frozenset())


# -- thread counts, errors and loaders, in fresh processes --------------------------------------

@T.prim_func
def _record(A: T.Buffer((8,), "float32")):
    """Each iteration calls back into Python (test.record_thread(i)), which notes its thread."""
    for i in T.parallel(8):
        T.evaluate(T.call_packed("test.record_thread", i))
        A[i] = T.float32(1)


@T.prim_func
def _checked(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in T.parallel(64):
        assert A[i] < T.float32(0.5), "value too large"
        B[i] = A[i] * T.float32(2)


@T.prim_func
def _failing_call(A: T.Buffer((8,), "float32")):
    for i in T.parallel(8):
        T.evaluate(T.call_packed("test.fail_at_5", i))
        A[i] = T.float32(1)


CHILD = """
    import json, os, threading, numpy as np, tvm, tvm_ffi
    seen = []

    @tvm_ffi.register_global_func("test.record_thread")
    def record(i):
        seen.append((int(i), threading.get_ident()))
        return 0

    @tvm_ffi.register_global_func("test.fail_at_5")
    def fail(i):
        if int(i) == 5:
            raise ValueError("the callback failed at 5")
        return 0

    if {loader!r} == "jitflow.load":
        import jitflow
        lib = jitflow.load({path!r})
    else:
        lib = tvm.runtime.load_module({path!r})
    lib["record"](tvm.runtime.tensor(np.zeros(8, "float32")))
    errors = []
    for name, args in (("checked", [np.linspace(0, 1, 64).astype("float32"), np.zeros(64, "float32")]),
                       ("failing_call", [np.zeros(8, "float32")])):
        try:
            lib[name](*[tvm.runtime.tensor(a) for a in args])
            errors.append(None)
        except Exception as exc:
            errors.append(str(exc))
    a = np.arange(64, dtype="float32") / 128
    b = tvm.runtime.tensor(np.zeros(64, "float32"))
    lib["checked"](tvm.runtime.tensor(a), b)
    r = tvm.runtime.tensor(np.zeros(ROWS, "float32"))
    lib["repeated"](tvm.runtime.tensor(a[:ROWS]), r)          # its loop runs three times in one launch
    print(json.dumps({{"seen": seen, "main": threading.get_ident(), "errors": errors,
                      "ok": bool(np.allclose(b.numpy(), a * 2)), "repeated": bool(np.allclose(r.numpy(), a[:ROWS] + 3)),
                      "runtime_only": bool(tvm.base._RUNTIME_ONLY)}}))
""".replace("ROWS", str(pk.ROWS))


@pytest.fixture(scope="module")
def exported(tmp_path_factory, zig_cache):
    kernels = (("record", _record), ("checked", _checked), ("failing_call", _failing_call), ("repeated", pk.repeated))
    mod = tvm.IRModule({n: f.with_attr("global_symbol", n) for n, f in kernels})
    out = tmp_path_factory.mktemp("parallel-lib") / "parallel.so"
    with module_cache(tmp_path_factory, zig_cache, "parallel-export-cache"):
        jitflow.compile(mod, "c").export_library(out)
    return out


@pytest.mark.parametrize("threads, loader, runtime_only", [
    (1, "jitflow.load", False), (2, "jitflow.load", True), (2, "tvm.runtime.load_module", False)],
    ids=["1-thread", "2-threads-runtime-only", "2-threads-tvm-loader"])
def test_tvm_num_threads_sets_the_tasks_and_errors_reach_python(exported, threads, loader, runtime_only):
    env = {"TVM_NUM_THREADS": str(threads), **({"TVM_USE_RUNTIME_LIB": "1"} if runtime_only else {})}
    got = json.loads(run_python(CHILD.format(path=str(exported), loader=loader), env=env).stdout.splitlines()[-1])
    assert got["runtime_only"] == runtime_only and got["ok"] and got["repeated"]
    assert sorted(i for i, _ in got["seen"]) == list(range(8))          # every iteration, once
    seen = dict(got["seen"])
    assert len(set(seen.values())) == threads
    # task t owns [t * chunk, (t + 1) * chunk), whose last piece the others leave to it
    chunk = 8 // threads
    assert len({seen[(t + 1) * chunk - 1] for t in range(threads)}) == threads
    if threads == 1:
        assert set(seen.values()) == {got["main"]}
    checked, failing = got["errors"]
    assert checked is not None and "value too large" in checked          # at one thread too (LLVM's host drops it)
    assert failing is not None and "the callback failed at 5" in failing


# -- a Relax model, and the same bytes when rebuilt -------------------------------------------

def test_a_relax_model_scheduled_by_dlight_runs_its_loops_on_the_pool(cache_dir):
    import models
    from tvm import relax
    from tvm.s_tir import dlight

    w = models.mlp_weights(seed=3)
    target = tvm.target.Target("llvm")
    with target:
        mod = tvm.transform.Sequential(relax.pipeline.library_dispatch_passes(target)
                                       + relax.pipeline.legalize_passes(target))(models.mlp(batch=1, weights=w))
        mod = dlight.ApplyDefaultSchedule(dlight.cpu.GEMV(), dlight.cpu.Reduction())(mod)
    exe = jitflow.compile(mod, "c")
    x = np.random.default_rng(4).standard_normal((1, 16)).astype("float32")
    np.testing.assert_allclose(exe.vm("cpu")["main"](x).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    launched = {x.function for x in exe.inspect().parallel}
    assert {"fused_matmul_add_relu", "fused_matmul1_add1"} <= launched


REBUILD = """
    import hashlib, jitflow, parallel_kernels
    exe = jitflow.compile(parallel_kernels.module(), "c")
    exe.build()
    launches = (exe.build_info.library.parent / "src" / "host.c").read_text().count("jitflow_launch_")
    print(hashlib.sha256(exe.build_info.library.read_bytes()).hexdigest(), launches > 0)
"""


def test_rebuilds_are_the_same_bytes(built, tmp_path, zig_cache):
    """The library built again in another process (another hash seed, another cache) is the same file."""
    import hashlib

    exe, rep = built
    assert rep.parallel
    again = run_python(REBUILD, env={"JITFLOW_CACHE_DIR": str(tmp_path / "again"), "PYTHONHASHSEED": "7",
                                     "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}).stdout.split()
    assert again == [hashlib.sha256(exe.build_info.library.read_bytes()).hexdigest(), "True"]


# -- aarch64, under qemu ------------------------------------------------------------------------

def test_aarch64_launches_run_under_qemu(cache_dir, tmp_path, zig_cache):
    """The same kernels built for aarch64 and run by the C test driver (tests/data/ffi_driver.c: its
    TVMBackendParallelLaunch runs 3 tasks on threads, with a barrier), against numpy; a failing
    assert in a body reaches the driver."""
    import arm_qemu

    (tmp_path / "driver").mkdir()
    driver = arm_qemu.build_driver(tmp_path / "driver", zig_cache)
    lib = jitflow.compile(pk.module(), "c", host=arm_qemu.ARM).export_library(tmp_path / "parallel.so")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((pk.ROWS, pk.COLS)).astype("float32")
    v = rng.standard_normal(pk.ROWS).astype("float32")
    zeros = np.zeros_like(v)
    cases = [("rows", [a, np.zeros_like(a)], np.sqrt(a * a + 1) * np.exp(a / 1000)),
             ("row_sums", [a, zeros], a.sum(axis=1)),
             ("several", [v, zeros, zeros], 1 + (v * 2)[::-1]),
             ("in_serial", [v, zeros], v + 6),
             ("symbolic", [v, zeros], v * 3),
             ("launch_point", [v, zeros, zeros], (v + 1)[::-1])]
    for name, arrays, expected in cases:
        proc, after = arm_qemu.call(driver, lib, arrays, tmp_path, symbol=f"__tvm_ffi_{name}")
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(after[-1], expected, rtol=1e-5, atol=1e-5, err_msg=name)
    failing = jitflow.compile(_checked, "c", host=arm_qemu.ARM).export_library(tmp_path / "checked.so")
    proc, _ = arm_qemu.call(driver, failing, [np.linspace(0, 1, 64).astype("float32"), np.zeros(64, "float32")],
                            tmp_path)
    assert proc.returncode == 2 and "value too large" in proc.stderr
