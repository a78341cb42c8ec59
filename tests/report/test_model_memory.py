"""The model view of inspect for Relax modules: storage per call, constants at start-up, workspaces,
launches and copies, read from real builds on "c" and "cuda" (sm_90, built without a GPU) and checked
against the VM bytecode itself."""
from __future__ import annotations

import json
import math
import textwrap
from dataclasses import replace
from types import SimpleNamespace

import models
import numpy as np
import pytest
from conftest import cache_at
from tvm.script import ir as I
from tvm.script import relax as R

import jitflow
from jitflow import cli
from jitflow.formats import library_blob, vm_program
from jitflow.report import Report, inspect_library


def _bytecode(library):
    """(alloc_storage sizes in bytes or None, non-builtin callees, tensor constant bytes) read straight
    from the library's VM program, independently of the report."""
    program = vm_program.parse(vm_program.payload_of(library_blob.parse(library_blob.blob_of(library))))
    consts = program.constants
    sizes, callees = [], []
    for ins in program.code("main"):
        if ins.op != "call":
            continue
        name = program.functions[ins.func].name
        if name == "vm.builtin.alloc_storage":
            shape, dtype = ins.args[1], ins.args[3]
            known = shape.kind == "const" and isinstance(consts[shape.value], vm_program.Shape)
            sizes.append(math.prod(consts[shape.value].dims) * consts[dtype.value].itemsize if known else None)
        elif not name.startswith("vm.builtin."):
            callees.append(name)
    weights = sum(c.nbytes for c in consts if isinstance(c, vm_program.TensorConstant))
    return sizes, callees, weights


def _calls(library):
    """(position, callee) of each call of a compiled function in main's bytecode."""
    program = vm_program.parse(vm_program.payload_of(library_blob.parse(library_blob.blob_of(library))))
    return [(i, program.functions[ins.func].name) for i, ins in enumerate(program.code("main"))
            if ins.op == "call" and not program.functions[ins.func].name.startswith("vm.builtin.")]


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache, shared_cache):
    """The MLP and the convnet for CUDA, the MLP and convnet for "c", a symbolic model for both: reports."""
    with cache_at(shared_cache, zig_cache):
        exes = {
            "mlp_cuda": jitflow.compile(models.mlp(), "cuda", arch="sm_90"),
            "conv_cuda": jitflow.compile(models.convnet(), "cuda", arch="sm_90"),
            "mlp_c": jitflow.compile(models.mlp(), "c"),
            "conv_c": jitflow.compile(models.convnet(), "c"),
            "sym_cuda": jitflow.compile(models.symbolic_mlp(), "cuda", arch="sm_90"),
            "sym_c": jitflow.compile(models.symbolic_mlp(), "c"),
        }
        reports = {name: exe.inspect() for name, exe in exes.items()}
        libraries = {name: exe.build_info.library for name, exe in exes.items()}
        folder = tmp_path_factory.mktemp("exported")
        exported = {name: exes[name].export_library(folder / f"{name}.so") for name in ("mlp_cuda", "sym_cuda")}
        yield SimpleNamespace(exes=exes, reports=reports, libraries=libraries, exported=exported)


def test_cuda_mlp_storage_constants_and_launches_per_call(built):
    rep = built.reports["mlp_cuda"]
    model = rep.model
    sizes, callees, weights = _bytecode(built.libraries["mlp_cuda"])
    assert model.devices == ("cuda", "cpu") and model.upload == "host->device"
    assert len(model.constants) == 4 and model.constant_bytes == weights
    assert weights == sum(v.nbytes for v in models.mlp_weights().values())
    main = model.function("main")
    assert main.params == ("x",)
    assert [s.bytes for s in main.storages] == sizes == [4 * 32 * 4, 4 * 8 * 4]
    assert [(s.device, [t.shape for t in s.tensors], s.holds_output) for s in main.storages] == \
        [("cuda", [(4, 32)], False), ("cuda", [(4, 8)], True)]
    assert list(main.calls) == callees == ["fused_matmul_add_relu", "fused_matmul1_add1"]
    # each call launches the kernels of the TIR functions it calls, as the host code launches them
    assert [x.kernel for x in main.launches] == ["fused_matmul_add_relu_kernel", "fused_matmul1_add1_kernel"]
    assert {replace(x, position=None) for x in main.launches} == set(rep.launches)   # each at its VM call
    assert [x.position for x in main.launches] == [i for i, name in _calls(built.libraries["mlp_cuda"])]
    totals = main.totals
    assert (totals.storages, totals.storage_bytes.value, totals.workspaces, totals.copies, totals.launches) == \
        (2, 640, 0, 0, 2)
    assert main.copies == () and model.not_called == ()
    text = str(rep)
    assert "model memory (Relax VM on cuda, host cpu):" in text
    assert "start-up: 4 constants (weights), 3232 B (3.2 KiB), copied host->device once, when the VM starts" in text
    assert "per call: 2 storages, 640 B; peak 640 B; 0 workspaces; 0 copies; 2 launches" in text
    assert "allocations: none" not in text and not any("Relax VM" in u for u in rep.unknown)


def test_cuda_convnet_lists_the_compiled_function_the_bytecode_never_calls(built):
    rep = built.reports["conv_cuda"]
    main = rep.model.function("main")
    sizes, callees, weights = _bytecode(built.libraries["conv_cuda"])
    assert [s.bytes for s in main.storages] == sizes == [2 * 8 * 16 * 16 * 4, 2 * 8 * 8 * 8 * 4, 2 * 10 * 4]
    assert list(main.calls) == callees and len(main.launches) == len(callees) == 3
    assert rep.model.constant_bytes == weights == sum(v.nbytes for v in models.convnet_weights().values())
    # TVM keeps the reshape's TIR function, but the bytecode reshapes with a builtin (a view, no copy)
    assert rep.model.not_called == ("reshape",) and "reshape_kernel" in {k.name for k in rep.kernels}
    assert "reshape_kernel" not in [x.kernel for x in main.launches]
    assert "compiled but never called by the bytecode: reshape" in str(rep)


def test_cpu_mlp_against_its_bytecode(built):
    rep = built.reports["mlp_c"]
    main = rep.model.function("main")
    sizes, callees, weights = _bytecode(built.libraries["mlp_c"])
    # TVM's CPU pipeline does not fuse: five TIR functions, five tensors in three blocks
    assert [s.bytes for s in main.storages] == sizes == [4 * 32 * 4, 4 * 32 * 4, 4 * 8 * 4]
    assert [s.shared_by for s in main.storages] == [2, 2, 1] and main.storages[-1].holds_output
    assert list(main.calls) == callees and len(callees) == 5
    assert rep.model.constant_bytes == weights and rep.model.upload is None
    assert main.launches == () and main.workspaces == () and main.copies == ()
    assert json.loads(rep.to_json())["model"]["functions"][0]["per_call"]["storage_bytes"] == 1152


def test_cpu_convnet_has_a_workspace_per_call_and_no_upload(built):
    rep = built.reports["conv_c"]
    model = rep.model
    main = model.function("main")
    assert model.devices == ("cpu",) and model.upload is None
    (pad,) = main.workspaces
    assert (pad.function, pad.buffer, pad.device, pad.bytes) == ("conv2d", "pad_temp", "cpu", 2 * 3 * 18 * 18 * 4)
    assert replace(pad, position=None) in rep.allocations and "TVMBackendAllocWorkspace" in rep.host_line(pad.line)
    sizes, callees, _ = _bytecode(built.libraries["conv_c"])
    assert [s.bytes for s in main.storages] == sizes and list(main.calls) == callees
    assert main.launches == () and main.totals.workspace_bytes.value == 7776
    assert sum(s.shared_by for s in main.storages) > len(main.storages)    # the planner shares blocks
    text = str(rep)
    assert "used in place (the VM runs on the host)" in text
    assert "1 workspace, 7776 B (7.6 KiB)" in text and "pad_temp" in text


def test_symbolic_shapes_give_size_expressions(built):
    for name in ("sym_cuda", "sym_c"):
        model = built.reports[name].model
        assert model.symbols == {"n": "x.shape[0]"}
        main = model.function("main")
        assert main.storages and all(s.bytes is None for s in main.storages)
        for s in main.storages:                       # each block holds an (n, 8) float32 tensor
            assert s.size.symbols == ("n",) and s.size.evaluate(n=10) == 320
            assert all(t.shape == ("n", 8) for t in s.tensors)
        assert main.totals.storage_bytes.evaluate(n=3) == 96 * len(main.storages)
    (launch,) = built.reports["sym_cuda"].model.function("main").launches
    assert launch.grid[0].symbols == ("n",) and launch.grid[0].evaluate(n=1000) > launch.grid[0].evaluate(n=1)
    assert "n * 32 B" in str(built.reports["sym_cuda"])


def test_model_json_round_trips_and_has_sizes_or_expressions(built):
    for name in ("mlp_cuda", "sym_cuda", "conv_c"):
        rep = built.reports[name]
        assert Report.from_json(rep.to_json()) == rep
    d = json.loads(built.reports["mlp_cuda"].to_json(sources=False))["model"]
    assert d["devices"] == ["cuda", "cpu"]
    assert d["startup"] == {"constants": 4, "constant_bytes": 3232, "upload": "host->device",
                            "tensors": d["startup"]["tensors"]}
    assert [t["shape"] for t in d["startup"]["tensors"]] == [[16, 32], [32], [32, 8], [8]]
    (main,) = d["functions"]
    assert main["per_call"] == {"storages": 2, "storage_bytes": 640, "workspaces": 0, "workspace_bytes": 0,
                                "copies": 0, "copy_bytes": 0, "launches": 2, "cached_storages": 0, "cached_bytes": 0,
                                "replayed": 0}
    assert (main["peak_bytes"], main["peak"], main["peaks"]) == (640, "640", {"cuda": 640})
    live = main["storages"][1].pop("live")
    assert main["storages"][1] == {"function": "main", "index": 1, "bytes": 128, "size": 128, "device": "cuda",
                                   "scope": "global", "dtype": "uint8", "shared_by": 1, "holds_output": True,
                                   "cached": False, "tensors": [{"shape": [4, 8], "dtype": "float32", "offset": 0}]}
    assert 0 <= live[0] <= live[1] == main["length"] - 1          # the output lives to the return
    sym = json.loads(built.reports["sym_cuda"].to_json(sources=False))["model"]["functions"][0]
    assert sym["storages"][0]["size"] == "n * 32" and sym["storages"][0]["bytes"] is None
    assert sym["per_call"]["storage_bytes"] == "n * 32"


def test_a_library_alone_has_storage_and_constants_but_not_launches(built):
    rep = inspect_library(built.exported["mlp_cuda"])
    main = rep.model.function("main")
    assert [s.bytes for s in main.storages] == [512, 128] and rep.model.constant_bytes == 3232
    assert main.launches is None and main.workspaces is None and rep.model.not_called is None
    assert any("without its host C" in u for u in rep.unknown)
    assert "launches: unknown (no host code)" in str(rep)
    # the build's memory record (a section of the library) gives the sizes a shape function computes
    sym = inspect_library(built.exported["sym_cuda"]).model
    (storage,) = sym.function("main").storages
    assert storage.size.text == "n * 32" and sym.function("main").peak.text == "n * 32" and not sym.notes


def test_cli_memory_section_shows_the_model(built, capsys, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(built.libraries["mlp_cuda"].parents[4]))
    key = built.exes["mlp_cuda"].key[:12]
    assert cli.main(["inspect", key, "--section", "memory", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)
    assert memory["model"]["functions"][0]["per_call"]["storage_bytes"] == 640
    assert cli.main(["inspect", str(built.exported["mlp_cuda"]), "--section", "memory"]) == 0
    out = capsys.readouterr().out
    assert "#0       512 B  cuda" in out and "start-up: 4 constants" in out


@I.ir_module
class ShapeFromTensor:
    @R.function
    def main(s: R.Tensor((2,), "int64"), y: R.Tensor((8,), "float32")):
        shape = R.tensor_to_shape(s)
        z = R.reshape(y, shape)
        return z


def test_copies_in_the_bytecode_have_direction_and_bytes(cache_dir):
    (copy,) = jitflow.compile(ShapeFromTensor, "cuda", arch="sm_90").inspect().model.function("main").copies
    assert (copy.call, copy.direction, copy.size.value, copy.tensor) == \
        ("vm.builtin.tensor_to_shape", "to host", 16, "int64[2]")
    # on the CPU the builtin reads the tensor in place: no copy
    assert jitflow.compile(ShapeFromTensor, "c").inspect().model.function("main").copies == ()


MODELS = '''
import jitflow, models

fused = jitflow.compile(models.mlp(), "cuda", arch="sm_90")
unfused = jitflow.compile(models.mlp(), "cuda", arch="sm_90", relax_pipeline=models.cuda_pipeline(fuse=False))
unplanned = jitflow.compile(models.mlp(), "cuda", arch="sm_90",
                            relax_pipeline=models.cuda_pipeline(fuse=False, plan=False))
'''


def test_diff_of_two_model_builds(cache_dir, tmp_path, capsys):
    path = tmp_path / "variants.py"
    path.write_text(textwrap.dedent(MODELS))
    assert cli.main(["inspect", "--diff", f"{path}:fused", f"{path}:unfused"]) == 1  # 1: the builds differ
    out = capsys.readouterr().out.splitlines()
    assert "kernels: 2 -> 5" in out and "model memory:" in out
    assert "  ~ main storage per call: 2, 640 B -> 3, 1152 B (1.1 KiB)" in out
    assert "  ~ main peak per call: 640 B -> 1024 B (1.0 KiB)" in out
    assert "  ~ main launches per call: 2 -> 5" in out
    assert "  ~ main calls: fused_matmul_add_relu, fused_matmul1_add1 -> matmul, add, relu, matmul1, add1" in out
    assert cli.main(["inspect", "--diff", f"{path}:unfused", f"{path}:unplanned", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["changed"] and d["kernels"]["count"] == [5, 5]
    assert [p["main"]["storages"] for p in d["model"]["per_call"]] == [3, 5]
    assert [p["main"]["storage_bytes"] for p in d["model"]["per_call"]] == [1152, 1792]
    assert "main storage per call" in {c["what"] for c in d["model"]["changed"]}
    # without planning every tensor has a block of its own: two more blocks, each holding one tensor
    added = [c for c in d["model"]["changed"] if c["a"] == "-"]
    assert len(added) == 2 and all(c["what"].startswith("main storage holding float32[") for c in added)
    assert d["schema"] == "jitflow.inspect-diff/2" and d["libraries"]["same"] is False
    assert cli.main(["inspect", "--diff", f"{path}:fused", f"{path}:fused"]) == 0
    assert "no difference" in capsys.readouterr().out


def test_the_model_runs_as_the_report_says(built):
    """The CPU model's numbers: the report is of the library that computes them."""
    w = models.convnet_weights()
    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype("float32")
    y = built.exes["conv_c"].vm()["main"](x).numpy()
    np.testing.assert_allclose(y, models.convnet_reference(x, w), rtol=1e-4, atol=1e-4)
