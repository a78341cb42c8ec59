"""Memory plans seen whole: each block's lifetime and each call's peak (checked against values worked
out by hand from the bytecode), sizes simplified at build time and evaluated at a shape, CUDA-graph
builds, the diff of two plans, the build's memory record in a hit and in an exported library, and
the timeline export."""
from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import chrome_events
import models
import pytest
from conftest import cache_at

import jitflow
from jitflow import cli
from jitflow.formats import memory_facts
from jitflow.report import Report, inspect_entry, inspect_library
from jitflow.report.memory_plan import ModelStorage, ModelTensor
from jitflow.report.memory_plan_diff import match_blocks

GRAPH = {"relax.backend.use_cuda_graph": True}


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache, shared_cache):
    with cache_at(shared_cache, zig_cache):
        exes = {
            "mlp_c": jitflow.compile(models.mlp(), "c"),
            "conv_c": jitflow.compile(models.convnet(), "c"),
            "conv_cuda": jitflow.compile(models.convnet(), "cuda", arch="sm_90"),
            "graph_cuda": jitflow.compile(models.convnet(), "cuda", arch="sm_90", pass_config=GRAPH),
            "sym_cuda": jitflow.compile(models.symbolic_mlp(), "cuda", arch="sm_90"),
            "sym_c": jitflow.compile(models.symbolic_mlp(), "c"),
            "two_c": jitflow.compile(models.two_symbols(), "c"),
        }
        reports = {name: exe.inspect() for name, exe in exes.items()}
        folder = tmp_path_factory.mktemp("exported")
        exported = {name: exes[name].export_library(folder / f"{name}.so") for name in ("sym_cuda", "graph_cuda")}
        yield SimpleNamespace(exes=exes, reports=reports, exported=exported, cache=shared_cache,
                              entries={n: e.build_info.library.parent for n, e in exes.items()})


def test_lifetimes_and_peak_of_the_cpu_mlp(built):
    """main's bytecode (worked out by hand): block 0 (512 B) is allocated at 2, its storage register
    emptied at 10, its tensors at 8 and 16; block 1 (512 B) at 5, emptied at 14, tensors at 12 and 21;
    block 2 (128 B) at 17 holds the output returned at 22. Positions 5 to 16 hold blocks 0 and 1."""
    main = built.reports["mlp_c"].model.function("main")
    assert [(s.bytes, s.live) for s in main.storages] == [(512, (2, 16)), (512, (5, 21)), (128, (17, 22))]
    assert main.peak.value == 1024 < main.totals.storage_bytes.value == 1152     # reuse: the peak is below the sum
    assert main.peaks == {"cpu": main.peak} and main.length == 23
    d = json.loads(built.reports["mlp_c"].to_json(sources=False))
    assert d["schema"] == "jitflow.inspect/2"
    f = d["model"]["functions"][0]
    assert (f["peak_bytes"], f["peak"]) == (1024, "1024")
    assert [s["live"] for s in f["storages"]] == [[2, 16], [5, 21], [17, 22]]
    assert all(s["live"][0] <= s["live"][1] for s in f["storages"])
    assert "peak 1024 B (1.0 KiB)" in str(built.reports["mlp_c"])


def test_peak_counts_a_workspace_at_its_call(built):
    """conv_c: blocks 0 and 1 (16 KiB each) are alive together from 5 to 16: 32768 B; at the conv2d
    call (position 4) only block 0 is, with its 7776 B padding workspace: 24160 B."""
    rep = built.reports["conv_c"]
    main = rep.model.function("main")
    (pad,) = main.workspaces
    assert (pad.bytes, pad.position) == (7776, 4) and main.peak.value == 32768
    conv2d = next(f for f in rep.functions if f.name == "conv2d")
    assert conv2d.peak.value == 7776 and pad.line < pad.freed_line <= conv2d.end_line
    assert all(f.peak.value == 0 for f in rep.functions if f.name != "conv2d")
    assert json.loads(rep.to_json(sources=False))["functions"][0].keys() >= {"peak_bytes", "peak"}


def test_symbolic_sizes_are_simplified_at_build_time(built):
    """sym_c's bytecode (by hand): blocks of n * 32 B at 7 (storage emptied at 10, its tensor at 18),
    at 13 (16, 25) and at 20 (23, returned at 27): two are alive together at 13-18 and at 20-25."""
    main = built.reports["sym_c"].model.function("main")
    assert [s.size.text for s in main.storages] == ["n * 32"] * 3
    assert [s.live for s in main.storages] == [(7, 18), (13, 25), (20, 27)]
    # the sum and the peak are simplified by TVM's analyzer, not left as n * 32 + n * 32 + n * 32
    assert (main.totals.storage_bytes.text, main.peak.text) == ("n * 96", "n * 64")
    two = built.reports["two_c"].model.function("main")
    assert two.totals.storage_bytes.text == "n * s * 8 + s * 4"
    assert two.peak.evaluate(n=3, s=5) == max(3 * 5 * 8, 4 * 5 * 4)


def test_evaluate_binds_the_shape(built):
    rep = built.reports["two_c"]
    assert rep.shape_symbols == ["n", "s"]
    at = rep.evaluate(n=32, s=128).model.function("main")
    assert [s.bytes for s in at.storages] == [32 * 128 * 4, 32 * 128 * 4, 128 * 4]
    assert at.peak.value == 32 * 128 * 8 and at.totals.storage_bytes.value == 32 * 128 * 8 + 512
    assert at.storages[0].tensors[0].shape == (32, 128)
    half = rep.evaluate(n=2).model.function("main")                  # s left out: still symbolic
    assert half.storages[0].size.symbols == ("s",) and half.storages[0].size.evaluate(s=3) == 24
    with pytest.raises(jitflow.errors.InvalidInputError, match="no shape symbol 'm'; its symbols are n, s"):
        rep.evaluate(m=1)
    launch = built.reports["sym_cuda"].evaluate(n=1000).kernels[0].launches[0]
    assert launch.grid[0].value == (1000 + 31) >> 5


def test_cli_shape(built, capsys, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.cache))
    key = built.exes["two_c"].key[:12]
    assert cli.main(["inspect", key, "--shape", "n=32,s=128", "--section", "memory", "--json"]) == 0
    main = json.loads(capsys.readouterr().out)["model"]["functions"][0]
    assert main["peak_bytes"] == 32 * 128 * 8 and main["per_call"]["storage_bytes"] == 32 * 128 * 8 + 512
    assert cli.main(["inspect", key, "--shape", "n=2", "--section", "memory"]) == 0
    assert "s * 8 B" in capsys.readouterr().out                      # s left out: its sizes stay symbolic
    assert cli.main(["inspect", key, "--shape", "q=3"]) == 2
    assert "no shape symbol 'q'; its symbols are n, s" in capsys.readouterr().err
    assert cli.main(["inspect", key, "--shape", "n"]) == 2
    assert "expected NAME=NUMBER" in capsys.readouterr().err


def test_a_report_at_a_shape_says_which(built, capsys, monkeypatch):
    """The text, the JSON and the timeline of a report evaluated at n = 32 say n = 32, and name n by the
    caller's argument (x.shape[0]) where the host code reads it from an inner buffer (lv.shape[0])."""
    rep = built.reports["sym_c"]
    assert rep.symbols == {"n": "x.shape[0]"} == dict(rep.model.symbols) and rep.shape == {}
    at = rep.evaluate(n=32)
    assert at.shape == {"n": 32} and at.shape_symbols == [] and rep.shape == {}
    lines = str(at).splitlines()
    assert lines[0] == f"jitflow inspect: build {built.exes['sym_c'].key[:12]} at n = 32"
    assert "symbols: n = 32 (x.shape[0])" in lines                       # the header
    assert "  symbols: n = 32 (x.shape[0])" in lines                     # the model section
    assert "symbols: n = x.shape[0]" in str(rep).splitlines()            # not evaluated: as before
    d = json.loads(at.to_json(sources=False))
    assert d["shape"] == {"n": 32} and d["symbols"] == {"n": "x.shape[0]"}
    assert json.loads(rep.to_json(sources=False))["shape"] == {}
    assert Report.from_json(at.to_json()) == at and Report.from_json(at.to_json()) != rep
    doc = at.timeline()
    assert doc["otherData"]["shape"] == {"n": 32} and doc["otherData"]["source"].endswith(" at n = 32")
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert names == ["main (one call at n = 32; 10 us per bytecode position)"]
    with pytest.raises(jitflow.errors.InvalidInputError, match="this report is at n = 32 already"):
        at.evaluate(n=64)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.cache))
    key = built.exes["sym_c"].key[:12]
    assert cli.main(["inspect", key, "--shape", "n=32", "--section", "memory", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shape"] == {"n": 32}
    assert cli.main(["inspect", key, "--shape", "n=32", "--section", "kernels"]) == 0
    assert "symbols: n = 32 (x.shape[0])" in capsys.readouterr().out.splitlines()


def test_a_shape_beyond_64_bits_is_a_clear_error(built, capsys, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.cache))
    key = built.exes["two_c"].key[:12]
    for value in ("9" * 5000, str(2 ** 63)):             # 5000 digits used to hit Python's 4300-digit limit
        assert cli.main(["inspect", key, "--shape", f"n={value}"]) == 2
        err = capsys.readouterr().err
        assert "a shape is at most 9223372036854775807" in err and "Traceback" not in err
    assert cli.main(["inspect", key, "--shape", "n=\u00b2"]) == 2          # a digit to isdigit(), not to int()
    assert "expected NAME=NUMBER" in capsys.readouterr().err
    assert cli.main(["inspect", key, "--shape", f"n={2 ** 63 - 1}", "--section", "memory"]) == 0
    capsys.readouterr()
    for bad in (10 ** 5000, -10 ** 5000, 2 ** 63):
        with pytest.raises(jitflow.errors.InvalidInputError, match="shape symbol n"):
            built.reports["two_c"].evaluate(n=bad)


def test_cuda_graph_build_is_reported_as_it_runs(built):
    plain = built.reports["conv_cuda"].model.function("main")
    graph_rep = built.reports["graph_cuda"]
    graph = graph_rep.model.function("main")
    # the capture and alloc functions are folded into main, not reported as functions of their own
    assert [f.name for f in graph_rep.model.functions] == ["main"]
    assert set(graph.folded) == {"cuda_graph_alloc", "main_cuda_graph_capture"}
    # each call launches what the plain build launches; the captured kernels are marked replayed
    assert [x.kernel for x in graph.launches] == [x.kernel for x in plain.launches]
    assert [x.kernel for x in graph.launches if x.replayed] == ["max_pool2d_kernel"]
    assert graph.totals.launches == plain.totals.launches == 3 and graph.totals.replayed == 1
    # the graph's storage is allocated once (cached), outside the per-call peak
    cached = [s for s in graph.storages if s.cached]
    assert [s.bytes for s in cached] == [16384, 4096] and graph.totals.cached_bytes.value == 20480
    assert (graph.totals.storages, graph.totals.storage_bytes.value, graph.peak.value) == (1, 80, 80)
    assert plain.peak.value == 16384 + 4096
    text = str(graph_rep)
    assert "(cached: allocated once)" in text and "replayed (CUDA graph)" in text
    assert "3 launches (1 replayed); 2 cached storages, 20480 B (20.0 KiB), allocated once (not per call)" in text


def test_cuda_graph_diff_with_b_pass_config(built, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.cache))
    path = tmp_path / "conv.py"
    path.write_text("import models\nconv = models.convnet()\n")
    args = ["inspect", "--diff", f"{path}:conv", f"{path}:conv", "--arch", "sm_90",
            "--b-pass-config", "relax.backend.use_cuda_graph=true"]
    assert cli.main(args) == 1
    out = capsys.readouterr().out.splitlines()
    assert f"+++ {path}:conv --b-pass-config relax.backend.use_cuda_graph=true" in out
    assert "  ~ main peak per call: 20480 B (20.0 KiB) -> 80 B" in out
    assert "  ~ main cached storage (allocated once): 0 -> 2, 20480 B (20.0 KiB)" in out
    assert "  ~ main storage holding float32[2, 8, 8, 8]: 4096 B (4.0 KiB) cuda -> 4096 B (4.0 KiB) cuda cached" in out
    assert not any("#" in line for line in out if "storage" in line)          # matched by tensors, not index
    assert cli.main(["inspect", "--section", "memory", str(path) + ":conv", "--b-arch", "sm_80"]) == 2


def _storage(index: int, nbytes: int, *tensors: tuple[int, ...]) -> ModelStorage:
    from jitflow.formats import c_expr

    return ModelStorage("main", index, c_expr.constant(nbytes), "cuda", "global", "uint8",
                        tuple(ModelTensor(t, "float32", 0) for t in tensors))


def test_blocks_are_matched_by_the_tensors_they_hold():
    a = (_storage(0, 64, (4, 4)), _storage(1, 32, (8,)), _storage(2, 16, (2, 2)))
    b = (_storage(0, 32, (8,)), _storage(1, 16, (2, 2)), _storage(2, 64, (4, 4)))     # the same, reordered
    assert all(x is not None and y is not None and x.tensors == y.tensors for x, y in match_blocks(a, b))
    c = (_storage(0, 64, (4, 4), (2, 8)), _storage(1, 48, (3, 4)))
    pairs = match_blocks(a, c)
    assert (a[0], c[0]) in pairs and (None, c[1]) in pairs and (a[1], None) in pairs and (a[2], None) in pairs


def test_diff_of_two_libraries_that_differ_only_in_their_host_code(cache_dir, tmp_path, capsys):
    import kernels

    two = jitflow.compile(kernels.axpb(2.0), "c").export_library(tmp_path / "two.so")
    three = jitflow.compile(kernels.axpb(3.0), "c").export_library(tmp_path / "three.so")
    assert cli.main(["inspect", "--diff", str(two), str(three)]) == 1
    out = capsys.readouterr().out
    assert "no difference" not in out
    assert "the libraries differ (sha256" in out and "cannot see without their IR" in out
    assert cli.main(["inspect", "--diff", str(two), str(two)]) == 0
    assert "no difference" in capsys.readouterr().out


def _strip_record(library, out):
    """A copy of the library whose memory record is not found (the section renamed, same length)."""
    data = library.read_bytes()
    name = memory_facts.SECTION.encode() + b"\0"
    assert data.count(name) == 1
    out.write_bytes(data.replace(name, b".jitflow.nomemo\0"))
    return out


def test_the_build_hit_and_export_report_the_same_memory(built, tmp_path):
    for name in ("sym_cuda", "graph_cuda"):
        entry = built.entries[name]
        record = (entry / memory_facts.FILE).read_bytes()
        assert json.loads(record)["schema"] == "jitflow.memory/1"
        assert memory_facts.read_library(built.exported[name]).to_json().encode() == record   # the same bytes
        views = [built.reports[name], inspect_entry(entry), inspect_library(built.exported[name])]
        plans = [[(s.size, s.live, s.cached) for s in v.model.function("main").storages] for v in views]
        peaks = [(v.model.function("main").peak, v.model.function("main").totals.storage_bytes) for v in views]
        assert plans[0] == plans[1] == plans[2] and peaks[0] == peaks[1] == peaks[2]
    # without the record (an older build, a library TVM made) the bytecode and host C still tell
    plain = inspect_library(_strip_record(built.exported["sym_cuda"], tmp_path / "plain.so")).model.function("main")
    assert plain.storages[0].size is None and plain.peak is None
    old = tmp_path / "old-entry"
    shutil.copytree(built.entries["sym_c"], old)
    (old / memory_facts.FILE).unlink()
    _strip_record(old / "lib.so", old / "lib.so")
    meta = json.loads((old / "meta.json").read_text())
    from jitflow.cache.store.entry import sha256_file

    meta["so_sha256"] = sha256_file(old / "lib.so")
    (old / "meta.json").write_text(json.dumps(meta))
    from_c = inspect_entry(old).model.function("main")
    assert [s.size.text for s in from_c.storages] == ["n * 32"] * 3        # read from the shape function's host C
    assert from_c.peak.evaluate(n=5) == built.reports["sym_c"].model.function("main").peak.evaluate(n=5) == 320


def test_report_json_reads_schema_1(built):
    d = json.loads(built.reports["mlp_c"].to_json())
    d["schema"] = "jitflow.inspect/1"
    for f in d["model"]["functions"]:
        for k in ("peak_bytes", "peak", "peaks", "length", "folded"):
            f.pop(k)
        for s in f["storages"]:
            s.pop("live"), s.pop("cached")
    old = Report.from_json(d)
    assert [s.bytes for s in old.model.function("main").storages] == [512, 512, 128]
    assert old.model.function("main").storages[0].live is None and old.model.function("main").peak is None
    assert Report.from_json(built.reports["graph_cuda"].to_json()) == built.reports["graph_cuda"]


def test_timeline_is_chrome_trace_events_with_the_peak(built, tmp_path, capsys, monkeypatch):
    for name in ("mlp_c", "graph_cuda", "conv_c"):
        rep = built.reports[name]
        events = chrome_events.check(rep.timeline())
        main = rep.model.function("main")
        assert chrome_events.counter_max(events) == main.peak.value
        assert sum(1 for e in events if e["ph"] == "b") == len(main.storages)
        assert [e["name"].split(" ")[0] for e in events if e["ph"] == "X"] == [x.kernel for x in main.launches]
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.cache))
    key = built.exes["sym_cuda"].key[:12]
    assert cli.main(["inspect", key, "--timeline", str(tmp_path / "t.json")]) == 2
    assert "give the shape to draw it, e.g. --shape n=32" in capsys.readouterr().err
    assert cli.main(["inspect", key, "--timeline", str(tmp_path / "t.json"), "--shape", "n=100"]) == 0
    events = chrome_events.check(json.loads((tmp_path / "t.json").read_text()))
    assert chrome_events.counter_max(events) == 3200


def test_given_a_path_timeline_and_html_return_the_path(built, tmp_path):
    """As export_library: with a path, the path written (not the whole document, which floods a
    REPL); without one, the document."""
    rep = built.reports["mlp_c"]
    assert rep.timeline(tmp_path / "plan.json") == tmp_path / "plan.json"
    assert json.loads((tmp_path / "plan.json").read_text()) == rep.timeline()
    written = rep.html(str(tmp_path / "plan.html"))
    assert written == tmp_path / "plan.html" and written.read_text() == rep.html()
    assert isinstance(rep.html(), str) and rep.html().startswith("<!DOCTYPE html>")


def test_host_function_timeline_of_a_kernel_library(cache_dir):
    import kernels

    rep = jitflow.compile(kernels.vecadd(), "c").inspect()
    doc = rep.timeline()
    chrome_events.check(doc)
    assert doc["otherData"]["peak_bytes"] == {f.name: 0 for f in rep.functions}
    assert rep.model is None and all(f.peak.value == 0 for f in rep.functions)
