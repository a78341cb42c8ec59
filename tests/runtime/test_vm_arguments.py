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
