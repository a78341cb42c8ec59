"""The one place the CUDA tools are found: CUDA_HOME, CUDA_PATH, PATH, beside nvcc, NVIDIA's wheels."""
from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

from jitflow.errors import ToolMissingError
from jitflow.toolchain.cuda import cuda_toolkit


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


def _wheel_nvdisasm() -> str | None:
    """The nvdisasm that NVIDIA's nvidia-cuda-nvdisasm wheel installed, or None without the wheel."""
    try:
        dist = importlib.metadata.distribution("nvidia-cuda-nvdisasm")
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((str(dist.locate_file(f)) for f in dist.files or () if f.name == "nvdisasm"), None)


def test_the_sass_extra_names_the_nvdisasm_wheel_of_the_cuda_extras_major():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    nvrtc = next(d for d in extras["cuda"] if d.startswith("nvidia-cuda-nvrtc"))
    assert extras["sass"] == ["nvidia-cuda-nvdisasm" + nvrtc[len("nvidia-cuda-nvrtc"):]]


@pytest.mark.skipif(_wheel_nvdisasm() is None, reason="the sass extra (nvidia-cuda-nvdisasm) is not installed")
def test_nvdisasm_is_found_in_its_wheel_without_a_toolkit_and_disassembles_what_jitflow_builds(bare, tmp_path):
    wheel = _wheel_nvdisasm()
    assert cuda_toolkit.find("nvdisasm") == wheel          # no CUDA_HOME, CUDA_PATH or PATH to find it on
    # a cubin NVRTC builds here (no driver needed), disassembled by the wheel's nvdisasm, in a fresh process
    code = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
import kernels, jitflow
rep = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cache=False).inspect()
print(rep.sass["sm_90"])
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert ".target\tsm_90" in out.stdout and re.search(r"^main_kernel:$", out.stdout, re.M), out.stdout[:2000]
    assert re.search(r"\bFADD(\.FTZ)? R\d+, R\d+, R\d+", out.stdout) and "EXIT" in out.stdout   # the add, in SASS
