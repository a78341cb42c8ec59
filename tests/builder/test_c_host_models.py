"""Real models through the C host end to end: a transformer layer with a -inf attention mask, and a
classifier head ending in a top-k (TVM's contrib topk, a packed call with buffers), against numpy and
TVM's LLVM build; the top-k model also exported and run in a runtime-only TVM."""
from __future__ import annotations

import sys

import numpy as np
import tvm
from conftest import ROOT, run_python

import jitflow

sys.path.insert(0, str(ROOT / "benchmarks"))
import nn_models  # noqa: E402


def _llvm(mod):
    return tvm.relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())


def _numpy(out):
    return [t.numpy() for t in out] if not hasattr(out, "numpy") else [out.numpy()]


def test_transformer_layer_with_causal_mask(cache_dir):
    model = nn_models.transformer_layer()
    x = model.example_input(1)
    exe = jitflow.compile(model.mod, "c")
    (got,) = _numpy(exe.vm()["forward"](tvm.runtime.tensor(x)))
    (llvm,) = _numpy(_llvm(model.mod)["forward"](tvm.runtime.tensor(x)))
    want = nn_models.transformer_reference(model, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, llvm, rtol=1e-6, atol=1e-6)
    host_c = (exe.build_info.library.parent / "src" / "host.c").read_text()
    assert "causal_mask" in host_c and "inff" not in host_c


def test_topk_head_here_and_in_a_runtime_only_tvm(cache_dir, tmp_path):
    model = nn_models.topk_head()
    x = model.example_input(2)
    exe = jitflow.compile(model.mod, "c")
    values, indices = _numpy(exe.vm()["forward"](tvm.runtime.tensor(x)))
    want_values, want_indices = nn_models.topk_reference(model, x)
    np.testing.assert_allclose(values, want_values, rtol=1e-5)
    np.testing.assert_array_equal(indices, want_indices)
    llvm_values, llvm_indices = _numpy(_llvm(model.mod)["forward"](tvm.runtime.tensor(x)))
    np.testing.assert_array_equal(indices, llvm_indices)
    np.testing.assert_allclose(values, llvm_values, rtol=1e-6)
    out = exe.export_library(tmp_path / "topk.so")
    np.save(tmp_path / "x.npy", x)
    proc = run_python(f"""
        import numpy as np, tvm, jitflow
        assert tvm.base._RUNTIME_ONLY
        vm = jitflow.load_vm({str(out)!r}, "cpu")
        values, indices = vm["forward"](tvm.runtime.tensor(np.load({str(tmp_path / "x.npy")!r})))
        print(" ".join(map(str, indices.numpy().reshape(-1))))
    """, env={"TVM_USE_RUNTIME_LIB": "1"})
    assert proc.stdout.split() == [str(i) for i in want_indices.reshape(-1)]
