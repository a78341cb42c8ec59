"""Builds in pieces, end to end: a model whose host C compiles in several zig processes computes what
numpy computes, the progress line says what the build is doing, and a CUDA module compiled kernel by
kernel keeps everything inspect reports."""
from __future__ import annotations

import io

import numpy as np
import pytest
import tvm

import jitflow
from jitflow import config
from jitflow.builder import progress, steps
from jitflow.builder.host_c import compile as host_compile
from jitflow.options import BuildOptions, InProcess
from jitflow.targets import resolve_target

DIMS = [8, 11, 14, 17, 20]


def _chain(seed: int = 0):
    """relu(linear) four times, shapes all different (so TVM emits distinct functions), weights bound."""
    from tvm import relax
    from tvm.relax.frontend import nn

    class Chain(nn.Module):
        def __init__(self) -> None:
            self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(DIMS, DIMS[1:])])

        def forward(self, x):
            for layer in self.layers:
                x = nn.op.relu(layer(x))
            return x

    mod, params = Chain().export_tvm({"forward": {"x": nn.spec.Tensor((2, DIMS[0]), "float32")}})
    rng = np.random.default_rng(seed)
    weights = {n: (rng.standard_normal([int(d) for d in p.shape]) * 0.5).astype("float32") for n, p in params}
    mod = relax.transform.BindParams("forward", weights)(mod)
    main = mod["forward"].without_attr("num_input").with_attr("global_symbol", "main")
    return tvm.IRModule({"main": main}), weights


def _reference(x, weights):
    for n in range(len(DIMS) - 1):
        x = np.maximum(x @ weights[f"layers.{n}.weight"].T + weights[f"layers.{n}.bias"], 0)
    return x


def test_a_model_compiled_in_pieces_matches_numpy(tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "3")
    mod, weights = _chain()
    said = progress.Progress("chain", stream=io.StringIO(), mode="off")
    stages: dict[str, float] = {}
    meta = steps.build_into(tmp_path, mod, resolve_target("c"), config.resolve(cache_dir=tmp_path / "unused"),
                            BuildOptions(), InProcess(), stages, said)
    assert host_compile.piece_count(len((tmp_path / "src" / "host.c").read_text()), 3) == 3
    assert meta["functions"] == ["main"]
    assert said.said[:2] == ["preparing", "lowering with TVM"] and "linking" in said.said
    assert "compiling the host C in 3 pieces (3 done)" in said.said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.so", "memory.json", "src"]   # no pieces or objects
    vm = jitflow.runtime.vm.virtual_machine(jitflow.runtime.load.load_library(tmp_path / "lib.so"))
    x = np.random.default_rng(1).standard_normal((2, DIMS[0])).astype("float32")
    y = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(y, _reference(x, weights), rtol=1e-5, atol=1e-5)


def test_kernels_compiled_apart_are_all_inspected(cache_dir, monkeypatch):
    import models

    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "2")
    rep = jitflow.compile(models.mlp(seed=11), "cuda", arch=["sm_80", "sm_90"]).inspect()
    assert len({e.module for e in rep.fatbin}) == 2                 # one device module per kernel
    assert sorted(k.name for k in rep.kernels) == ["fused_matmul1_add1_kernel", "fused_matmul_add_relu_kernel"]
    for kernel in rep.kernels:
        assert all(a.name for a in kernel.args)                      # parameters read from the kept source
        assert [(a.arch, a.sass) for a in kernel.archs] == [("sm_80", True), ("sm_90", True)]
        assert all(a.registers for a in kernel.archs)                # from the cubins and ptxas' log
    assert rep.notes == ()


def test_build_jobs_setting(monkeypatch):
    from jitflow.errors import InvalidInputError

    for raw, jobs in (("4", 4), ("", None)):
        monkeypatch.setenv("JITFLOW_BUILD_JOBS", raw)
        assert config.resolve().build_jobs == jobs
    for bad in ("0", "-2", "1.5", "many"):
        monkeypatch.setenv("JITFLOW_BUILD_JOBS", bad)
        with pytest.raises(InvalidInputError, match="JITFLOW_BUILD_JOBS"):
            config.resolve()
    assert host_compile.piece_count(10_000_000, 1) == 1 and host_compile.piece_count(1000, 16) == 1


def test_a_model_with_kernels_in_several_device_modules(cache_dir, monkeypatch, tmp_path):
    from jitflow.formats import library_blob

    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "3")
    mod, _ = _chain()
    lib = jitflow.compile(mod, "cuda", arch="sm_90").export_library(tmp_path / "chain.so")
    blob = library_blob.parse(library_blob.blob_of(lib))
    cuda = [i for i, m in enumerate(blob.modules) if m.kind == "cuda"]
    kernels = [k.name for i in cuda for k in library_blob.parse_cuda_payload(blob.modules[i].payload).kernels]
    assert len(cuda) == 3 and len(kernels) == len(set(kernels)) >= 4
    host = blob.kinds().index("_lib")                        # the host library imports every piece
    assert sorted(blob.child_indices[blob.row_ptr[host]:blob.row_ptr[host + 1]]) == cuda


@pytest.mark.gpu
def test_a_model_compiled_in_pieces_runs_on_the_gpu(cache_dir, monkeypatch):
    import tvm

    if tvm.base._RUNTIME_ONLY:
        pytest.skip("needs TVM's compiler")
    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "3")
    mod, weights = _chain(seed=2)
    vm = jitflow.compile(mod, "cuda").vm("cuda")              # arch from the visible GPU
    x = np.random.default_rng(3).standard_normal((2, DIMS[0])).astype("float32")
    y = vm["main"](tvm.runtime.tensor(x, tvm.cuda(0))).numpy()
    np.testing.assert_allclose(y, _reference(x, weights), rtol=1e-4, atol=1e-4)
