"""The one place the CUDA tools are found: CUDA_HOME, CUDA_PATH, PATH, beside nvcc, NVIDIA's wheels."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from jitflow.errors import ToolMissingError
from jitflow.toolchain import cuda_toolkit


def _tool(folder: Path, name: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def bare(monkeypatch, tmp_path):
    """An environment with no CUDA tool in it: an empty PATH, no CUDA_HOME or CUDA_PATH."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_each_tool_is_found_in_one_order_and_again_when_the_environment_changes(bare, tmp_path):
    home, other, on_path = tmp_path / "home", tmp_path / "other", tmp_path / "bin"
    in_home = _tool(home / "bin", "nvdisasm")
    in_other = _tool(other / "bin", "nvdisasm")
    listed = _tool(on_path, "nvdisasm")
    bare.setenv("PATH", str(on_path))
    assert cuda_toolkit.find("nvdisasm") == listed
    bare.setenv("CUDA_PATH", str(other))
    assert cuda_toolkit.find("nvdisasm") == in_other
    bare.setenv("CUDA_HOME", str(home))
    assert cuda_toolkit.find("nvdisasm") == in_home      # CUDA_HOME, then CUDA_PATH, then PATH


def test_tools_beside_an_nvcc_reached_through_a_link(bare, tmp_path):
    toolkit = tmp_path / "cuda-13.0" / "bin"
    nvcc = _tool(toolkit, "nvcc")
    ptxas = _tool(toolkit, "ptxas")
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(nvcc, links / "nvcc")
    bare.setenv("PATH", str(links))
    assert cuda_toolkit.find("nvcc") == str(links / "nvcc")
    assert cuda_toolkit.find("ptxas") == ptxas


def test_a_missing_tool_says_what_needs_it_where_it_was_looked_for_and_the_fix(bare):
    if cuda_toolkit.find("cuobjdump") is not None:
        pytest.skip("a cuobjdump from NVIDIA's wheels is installed")
    with pytest.raises(ToolMissingError, match=r"SASS needs cuobjdump, which is not in CUDA_HOME, CUDA_PATH, "
                                               r"PATH.*; install a CUDA toolkit"):
        cuda_toolkit.require("cuobjdump", "SASS", "install a CUDA toolkit")


def test_a_missing_nvcc_is_not_said_to_be_missing_beside_itself(bare, cache_dir):
    import kernels

    import jitflow

    if cuda_toolkit.find("nvcc") is not None:
        pytest.skip("an nvcc from NVIDIA's wheels is installed")
    with pytest.raises(ToolMissingError) as err:
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cuda_compiler="nvcc").build()
    text = str(err.value)
    assert "needs nvcc, which is not in CUDA_HOME, CUDA_PATH, PATH and NVIDIA's pip wheels" in text, text
    assert "beside nvcc" not in text
    assert "beside nvcc" in cuda_toolkit.where("ptxas")      # the other tools are looked for beside it
