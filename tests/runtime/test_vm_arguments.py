"""A Relax VirtualMachine's arguments are checked before anything is loaded."""
from __future__ import annotations

import pytest

import jitflow
from jitflow.errors import InvalidInputError, LoadError


@pytest.mark.parametrize("memory_cfg", ["bogus", "Pooled", 3, {"cpu": "bogus"}])
def test_an_unknown_memory_cfg_names_the_ones_there_are(tmp_path, memory_cfg):
    with pytest.raises(InvalidInputError, match="memory_cfg must be one of 'pooled', 'naive'"):
        jitflow.load_vm(tmp_path / "missing.so", memory_cfg=memory_cfg)


@pytest.mark.parametrize("memory_cfg", [None, "pooled", "naive"])
def test_known_memory_cfgs_go_on_to_load(tmp_path, memory_cfg):
    with pytest.raises(LoadError, match="no library"):
        jitflow.load_vm(tmp_path / "missing.so", memory_cfg=memory_cfg)


def test_a_numpy_array_with_no_rows_goes_straight_to_a_vm_function(cache_dir):
    """numpy gives an array of shape (0, 16) strides (0, 0); TVM's check of compact tensors refused it."""
    import models
    import numpy as np
    import tvm

    vm = jitflow.compile(models.symbolic_mlp(), "c").vm("cpu")
    w = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    for rows in (0, 3):
        x = np.random.default_rng(1).standard_normal((rows, 16)).astype("float32")
        out = vm["main"](x, w).numpy()
        assert out.shape == (rows, 8)
        np.testing.assert_allclose(out, 2 * np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
        assert vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w)).numpy().shape == (rows, 8)
