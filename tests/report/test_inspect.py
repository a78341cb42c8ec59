"""exe.inspect() and `jitflow inspect`: kernels, launches, allocations and copies read from real builds.

CUDA builds here need no GPU (NVRTC from the pip wheels); SASS text only where a disassembler exists.
"""
from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import kernels
import pytest
import tvm
from conftest import module_cache
from tvm.script import tirx as T

import jitflow
from jitflow import cli
from jitflow.builder import lower
from jitflow.errors import CompileError, InvalidInputError, ToolMissingError
from jitflow.inputs import ir_module
from jitflow.report import Report, device_text
from jitflow.report import host_code as host_analysis
from jitflow.report.gather import inspect_entry, inspect_library
from jitflow.targets import resolve_target


def padded_stencil(n: int = 62):
    """P = A padded by one on each side (an intermediate in global memory), C = a diagonal stencil of P."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        P = T.sblock_alloc_buffer((n + 2, n + 2), "float32")
        for i, j in T.grid(n + 2, n + 2):
            with T.sblock("P"):
                vi, vj = T.axis.remap("SS", [i, j])
                P[vi, vj] = T.if_then_else(1 <= vi and vi <= n and 1 <= vj and vj <= n,
                                           A[vi - 1, vj - 1], T.float32(0))
        for i, j in T.grid(n, n):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = P[vi, vj] + P[vi + 1, vj + 1] + P[vi + 2, vj + 2]

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": main}))
    for name in ("P", "C"):
        fused = sch.fuse(*sch.get_loops(sch.get_sblock(name)))
        bx, tx = sch.split(fused, [None, 128])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def symbolic_two_stage():
    """B = 2A, C = B + 1 over n float16 elements, n known only at run time."""

    @T.prim_func(s_tir=True)
    def main(a: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float16")
        C = T.match_buffer(c, (n,), "float16")
        B = T.sblock_alloc_buffer((n,), "float16")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float16(2)
        for i in range(n):
            with T.sblock("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = B[vi] + T.float16(1)

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": main}))
    for name in ("B", "C"):
        (i,) = sch.get_loops(sch.get_sblock(name))
        bx, tx = sch.split(i, [None, 128])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def matmul_dynamic_shared(n: int = 256, tile: int = 16):
    """kernels.matmul_shared, with its tiles in dynamic shared memory."""
    sch = tvm.s_tir.Schedule(kernels.matmul(n))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, tile])
    bj, tj = sch.split(j, [None, tile])
    ko, _ki = sch.split(k, [None, tile])
    sch.reorder(bi, bj, ti, tj, ko, _ki)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    for index in (0, 1):
        shared = sch.cache_read(block, index, "shared.dyn")
        sch.compute_at(shared, ko)
        _, ty, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, tile, tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def _lowered_host(mod, target="cuda"):
    """(host analysis, lowered) of a module, without building it."""
    lowered = lower.lower(ir_module.prepare(mod), resolve_target(target, "sm_90" if target == "cuda" else None))
    infos = [k for d in lowered.devices for k in d.payload.kernels]
    return host_analysis.analyze(lowered.host_c, infos), lowered


@pytest.fixture(scope="module")
def vecadd(tmp_path_factory, zig_cache):
    """vecadd split by 128, built once for sm_80 and sm_90, its report and its exported library."""
    with module_cache(tmp_path_factory, zig_cache, "inspect-cache") as cache:
        exe = jitflow.compile(kernels.vecadd_cuda(1024, 128), "cuda", arch=["sm_80", "sm_90"])
        rep = exe.inspect()
        so = exe.export_library(tmp_path_factory.mktemp("exported") / "vecadd.so")
        yield SimpleNamespace(exe=exe, rep=rep, so=so, cache=cache)


def test_intermediate_buffer_is_listed_with_its_exact_size(cache_dir):
    rep = jitflow.compile(padded_stencil(62), "cuda", arch="sm_90").inspect()
    (alloc,) = rep.allocations
    assert (alloc.function, alloc.buffer, alloc.scope, alloc.device, alloc.dtype) == \
        ("main", "P", "global", "cuda", "float32")
    assert alloc.bytes == 64 * 64 * 4
    line = rep.host_line(alloc.line)                      # links back to the host C
    assert "TVMBackendAllocWorkspace" in line and "P" in line
    assert alloc.freed_line > alloc.line and "TVMBackendFreeWorkspace" in rep.host_line(alloc.freed_line)
    assert rep.host_c_path and open(rep.host_c_path).read() == rep.host_c
    totals = rep.allocation_totals
    assert totals.count == 1 and totals.bytes.value == 16384
    # the two stages: 64*64 pad elements in blocks of 128, then 62*62 outputs (the last block partial)
    assert [(k.grid[0].value, k.block[0].value) for k in rep.kernels] == [(32, 128), (31, 128)]
    launches = rep.launches
    assert launches[0].line < launches[1].line < alloc.freed_line
    text = str(rep)
    assert "16384 B" in text and f"host.c:{alloc.line}" in text
    assert rep.copies == ()


def test_launch_table_of_a_known_schedule_agrees_with_the_fatbin(vecadd):
    rep = vecadd.rep
    (k,) = rep.kernels
    assert k.name == "main_kernel" and k.launch_params == ("blockIdx.x", "threadIdx.x")
    assert [d.value for d in k.grid] == [8, 1, 1] and [d.value for d in k.block] == [128, 1, 1]
    assert k.dynamic_shared_memory.value == 0 and k.launch_bounds == 128
    assert [(a.ctype, a.name, a.dtype) for a in k.args] == [("float*", f"{n}_ptr", "handle64") for n in "ABC"]
    assert k.launches[0].args == ("A", "B", "C")
    assert [a.arch for a in k.archs] == ["sm_80", "sm_90"] and all(a.sass for a in k.archs)
    assert all(a.registers and a.registers > 0 and a.spill_stores == 0 for a in k.archs)
    assert {(e.kind, e.arch) for e in rep.fatbin} == {("sass", "sm_80"), ("sass", "sm_90"), ("ptx", "compute_80")}
    assert rep.notes == ()                      # cubin registers agree with ptxas' log, every kernel launched
    assert rep.allocations == () and rep.copies == ()
    assert "(8, 1, 1)" in str(rep) and "(128, 1, 1)" in str(rep)


def test_a_cache_hit_and_the_entry_report_the_same(vecadd):
    again = jitflow.compile(kernels.vecadd_cuda(1024, 128), "cuda", arch=["sm_80", "sm_90"]).inspect()
    assert again.build.startswith("hit") and again.kernels == vecadd.rep.kernels
    entry = inspect_entry(vecadd.exe.key[:10])
    assert entry.origin == "cache-entry" and entry.kernels == vecadd.rep.kernels
    assert entry.host_c == vecadd.rep.host_c
    with pytest.raises(InvalidInputError, match="no cache entry"):
        inspect_entry("0123456789abcdef")


def test_library_without_ir_lists_both_archs_and_what_it_cannot_know(vecadd, capsys):
    rep = inspect_library(vecadd.so)
    assert rep.origin == "library" and rep.host_c is None and rep.allocations is None and rep.copies is None
    (k,) = rep.kernels
    assert k.launch_params == ("blockIdx.x", "threadIdx.x") and k.launches == ()
    built = vecadd.rep.kernels[0]
    assert [(a.arch, a.sass, a.registers) for a in k.archs] == [(a.arch, True, a.registers) for a in built.archs]
    assert {(e.kind, e.arch, e.size) for e in rep.fatbin} == {(e.kind, e.arch, e.size) for e in vecadd.rep.fatbin}
    assert "__tvm_ffi_main" in rep.library.exports and rep.library.machine == "x86_64"
    assert rep.library.size == vecadd.so.stat().st_size
    assert any("allocations" in u for u in rep.unknown)
    assert rep.key == vecadd.exe.key                      # found in the cache by its sha256
    assert cli.main(["inspect", str(vecadd.so)]) == 0
    out = capsys.readouterr().out
    assert "sass sm_80" in out and "sass sm_90" in out and "ptx compute_80" in out and "not known here" in out


def test_uncached_cpu_build_is_read_before_its_folder_goes(cache_dir):
    exe = jitflow.compile(kernels.vecadd(), "c", cache=False)
    rep = exe.inspect()
    assert rep.build.startswith("built") and not exe.build_info.library.exists()
    assert rep.library.path is None and rep.host_c_path is None and "__tvm_ffi_main" in rep.host_c
    assert [f.name for f in rep.functions] == ["main"] and rep.kernels == () and rep.allocations == ()
    assert rep.target["kind"] == "c" and rep.fatbin == () and not cache_dir.exists()


def test_symbolic_shapes_give_size_and_grid_expressions():
    host, _ = _lowered_host(symbolic_two_stage())
    assert host.symbols == {"n": "A.shape[0]"}
    (alloc,) = host.allocations
    assert alloc.dtype == "float16" and alloc.bytes is None and alloc.size.text == "2 * n"
    assert alloc.size.evaluate(n=1000) == 2000
    first, second = host.launches
    assert first.grid[0].evaluate(n=1024) == 8 and first.grid[0].evaluate(n=1025) == 9
    assert first.block[0].value == 128 and first.args[:2] == ("A", "B") and second.args[:2] == ("B", "C")
    with pytest.raises(InvalidInputError, match="give a value for n"):
        alloc.size.evaluate()


def test_c_expressions_read_like_c():
    from jitflow.formats import c_expr

    e = c_expr.parse("cse_v1", {"cse_v1": "((((int64_t)m) + (int64_t)127) / (int64_t)128)"})
    assert e.text == "(m + 127) / 128" and e.symbols == ("m",)
    assert e.evaluate(m=1) == 1 and e.evaluate(m=-200) == 0        # C division truncates toward zero
    assert c_expr.parse("((uint64_t)3ULL * (uint64_t)7ULL) % 4").value == 1
    assert c_expr.parse("(0 - 7) % 2").value == -1 and c_expr.parse("!(3 == 4)").value == 1
    assert c_expr.parse(e.text) == e                                  # the readable form reads back


def test_dynamic_shared_memory_and_2d_launch_come_from_the_host_call():
    host, _ = _lowered_host(matmul_dynamic_shared(256, 16))
    (launch,) = host.launches
    assert [d.value for d in launch.grid] == [16, 16, 1] and [d.value for d in launch.block] == [16, 16, 1]
    assert launch.dynamic_shared_memory.value == 2 * 16 * 16 * 4     # the A and B tiles
    assert host.allocations == []


def test_runtime_copies_in_the_host_code_are_listed():
    @T.prim_func(s_tir=True)
    def copy(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        T.evaluate(T.call_packed("runtime.TVMTensorCopyFromTo", A.data, B.data))

    host, lowered = _lowered_host(tvm.IRModule({"main": copy}), "c")
    (c,) = host.copies
    assert c.call == "runtime.TVMTensorCopyFromTo" and c.function == "main"
    assert "TVMFFIFunctionCall" in lowered.host_c.splitlines()[c.line - 1]


def test_json_round_trips(vecadd):
    rep = vecadd.rep
    back = Report.from_json(rep.to_json())
    assert back == rep and back.to_json() == rep.to_json()
    slim = json.loads(rep.to_json(sources=False))
    assert "sources" not in slim and Report.from_json(slim).host_c is None
    assert set(slim) >= {"schema", "origin", "library", "target", "key", "kernels", "allocations",
                         "allocation_totals", "copies", "fatbin", "unknown", "notes", "functions", "symbols"}
    kernel = slim["kernels"][0]
    assert kernel["launches"][0]["grid"] == [8, 1, 1] and kernel["archs"]["sm_90"]["sass"] is True
    with pytest.raises(InvalidInputError, match="schema"):
        Report.from_json({"schema": "other"})


def test_ptx_is_made_for_each_arch(vecadd):
    ptx = vecadd.rep.ptx
    assert list(ptx) == ["sm_80", "sm_90"]
    assert ".target sm_90" in ptx["sm_90"] and ".entry main_kernel" in ptx["sm_90"]
    assert ".target sm_80" in ptx["compute_80"]
    with pytest.raises(InvalidInputError, match="sm_80, sm_90"):
        ptx["sm_70"]


def test_sass_says_so_where_no_disassembler_is_installed(vecadd, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))          # no nvdisasm, cuobjdump or nvcc to be found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    if device_text.find_sass_tool() is not None:
        pytest.skip("a disassembler from NVIDIA's wheels is installed")
    rep = inspect_entry(vecadd.exe.key)
    with pytest.raises(ToolMissingError, match="nvdisasm or cuobjdump"):
        rep.sass["sm_90"]
    assert any("nvdisasm or cuobjdump" in u for u in rep.unknown) and "nvdisasm or cuobjdump" in str(rep)


@pytest.mark.skipif(device_text.find_sass_tool() is None, reason="no nvdisasm or cuobjdump here")
def test_sass_where_a_disassembler_is_installed(vecadd):
    for arch in ("sm_80", "sm_90"):
        assert "main_kernel" in vecadd.rep.sass[arch]


def _fake_disassembler(tmp_path, monkeypatch, script: str) -> None:
    """An `nvdisasm` that runs `script`, where jitflow looks first (CUDA_HOME/bin)."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    tool = home / "bin" / "nvdisasm"
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert device_text.find_sass_tool() == ("nvdisasm", str(tool))


def test_sass_from_a_disassembler_whose_output_is_not_utf8(vecadd, monkeypatch, tmp_path, capsys):
    _fake_disassembler(tmp_path, monkeypatch, "printf 'main_kernel: \\377\\376 IADD3 R1, R2\\n'\n")
    text = inspect_entry(vecadd.exe.key).sass["sm_90"]
    assert text == "main_kernel: \ufffd\ufffd IADD3 R1, R2\n"
    assert cli.main(["inspect", vecadd.exe.key[:12], "--section", "sass"]) == 0
    assert "// ---- SASS sm_90 ----\nmain_kernel: \ufffd\ufffd IADD3" in capsys.readouterr().out


@pytest.mark.slow
def test_a_disassembler_that_never_answers_is_stopped(vecadd, monkeypatch, tmp_path, capsys):
    # a wrapper whose child holds the output open too: both are stopped
    _fake_disassembler(tmp_path, monkeypatch, "sleep 600 &\nprintf 'partial'\nsleep 600\n")
    monkeypatch.setattr(device_text, "SASS_TIMEOUT_S", 2.0)
    with pytest.raises(CompileError, match="no answer within 2 s") as caught:
        inspect_entry(vecadd.exe.key).sass["sm_90"]
    assert "partial" in caught.value.log
    assert cli.main(["inspect", vecadd.exe.key[:12], "--section", "sass"]) != 0
    err = capsys.readouterr().err
    assert "no answer within 2 s" in err and "Traceback" not in err


MODEL = '''
import kernels
import tvm
from tvm.script import tirx as T
import jitflow


def two_stage(fused, threads):
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
        B = T.sblock_alloc_buffer((1024,), "float32")
        for i in range(1024):
            with T.sblock("B"):
                vi = T.axis.spatial(1024, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(1024):
            with T.sblock("C"):
                vi = T.axis.spatial(1024, i)
                C[vi] = B[vi] + T.float32(1)

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": main}))
    if fused:
        sch.compute_inline(sch.get_sblock("B"))
    for name in ["C"] if fused else ["B", "C"]:
        (i,) = sch.get_loops(sch.get_sblock(name))
        bx, tx = sch.split(i, [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


chain = kernels.chain()

Staged = two_stage(False, 128)
Fused = two_stage(True, 256)
reuse = jitflow.compile(chain, "c")
no_reuse = jitflow.compile(chain, "c", pass_config={"tirx.disable_storage_rewrite": True})
'''


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(MODEL))
    return path


def test_diff_of_two_schedules(cache_dir, model, capsys):
    a, b = f"{model}:Staged", f"{model}:Fused"
    assert cli.main(["inspect", "--diff", a, b, "--arch", "sm_90"]) == 1   # they differ, as diff says
    out = capsys.readouterr().out.splitlines()
    assert "kernels: 2 -> 1" in out
    assert "  - main_kernel_1: grid (8, 1, 1), block (128, 1, 1)" in out
    assert "  ~ main_kernel grid: (8, 1, 1) -> (4, 1, 1)" in out
    assert "  ~ main_kernel block: (128, 1, 1) -> (256, 1, 1)" in out
    assert "allocations: 1 -> 0, bytes 4096 B -> 0 B" in out
    assert cli.main(["inspect", "--diff", a, b, "--arch", "sm_90", "--json"]) == 1   # cache hits now
    d = json.loads(capsys.readouterr().out)
    assert d["changed"] and d["kernels"]["count"] == [2, 1] and d["kernels"]["removed"] == ["main_kernel_1"]
    assert d["allocations"]["count"] == [1, 0] and d["allocations"]["bytes"] == [4096, 0]
    assert cli.main(["inspect", "--diff", a, a, "--arch", "sm_90"]) == 0
    assert "no difference" in capsys.readouterr().out


def test_diff_of_two_pass_configurations_shows_the_memory_plan(cache_dir, model, capsys):
    assert cli.main(["inspect", "--diff", f"{model}:reuse", f"{model}:no_reuse", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["allocations"]["count"] == [1, 2] and d["allocations"]["bytes"] == [4096, 8192]
    assert [(x["buffer"], x["bytes"], x["device"]) for x in d["allocations"]["added"]] == [("C", 4096, "cpu")]


def test_cli_sections_and_json(vecadd, capsys):
    key = vecadd.exe.key[:12]
    assert cli.main(["inspect", key, "--section", "memory", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)
    assert memory == {"allocations": [], "allocation_totals": {"count": 0, "bytes": 0}, "copies": [], "symbols": {},
                      "model": None, "shape": {}}
    assert cli.main(["inspect", key, "--section", "host"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == vecadd.rep.host_c.rstrip("\n")
    assert cli.main(["inspect", key, "--json"]) == 0
    assert Report.from_json(capsys.readouterr().out).kernels == vecadd.rep.kernels
    assert cli.main(["inspect", str(vecadd.so), "--section", "host"]) == 2
    assert "no host C" in capsys.readouterr().err
    assert cli.main(["inspect", "nothing-here"]) == 2
    assert "expected FILE.py:NAME" in capsys.readouterr().err
