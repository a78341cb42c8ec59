"""TVM's own CUDA compiler variables (TVM_CUDA_*): applied to jitflow's device compile as TVM applies
them to its own, in the key when they change the flags, and said once where they do not apply."""
from __future__ import annotations

import logging

import kernels
import pytest

import jitflow
from jitflow import logs
from jitflow.config import TvmCudaSettings, resolve_tvm_cuda
from jitflow.errors import CompileError, InvalidInputError
from jitflow.toolchain.cuda import cuda_flags

ALL = ("TVM_CUDA_NVRTC_EXTRA_OPTS", "TVM_CUDA_PTXAS_REG_LEVEL", "TVM_CUDA_PTXAS_EXTRA_OPTS",
       "TVM_CUDA_NVCC_NO_FAST_MATH", "TVM_CUDA_COMPILE_MODE")


@pytest.fixture(autouse=True)
def no_tvm_cuda_variables(monkeypatch):
    for name in ALL:
        monkeypatch.delenv(name, raising=False)
    logs.forget_warnings()


def test_the_flags_follow_tvms_reading_of_its_variables(caplog):
    caplog.set_level(logging.WARNING, "jitflow")
    tvm = TvmCudaSettings(nvrtc_extra=("--ftz=false",), ptxas_reg_level=4, ptxas_extra=("-O1",),
                          nvcc_no_fast_math=True, compile_mode="nvcc")
    nvrtc = cuda_flags.for_build(tvm, "nvrtc")
    assert "--register-usage-level=4" in nvrtc.ptxas and "--register-usage-level=10" not in nvrtc.ptxas
    assert nvrtc.ptxas[-1] == "-O1" and nvrtc.extra == ("--ftz=false",)
    assert cuda_flags.FAST_MATH in nvrtc.defines             # NO_FAST_MATH is nvcc's, as in TVM
    nvcc = cuda_flags.for_build(tvm, "nvcc")
    assert cuda_flags.FAST_MATH not in nvcc.defines and nvcc.extra == () and "-O1" in nvcc.ptxas
    said = [r.getMessage() for r in caplog.records]
    for name in ("TVM_CUDA_NVCC_NO_FAST_MATH", "TVM_CUDA_NVRTC_EXTRA_OPTS", "TVM_CUDA_COMPILE_MODE=nvcc"):
        assert sum(m.startswith(f"jitflow: {name}") for m in said) == 1, said   # once, where it does not apply
    assert cuda_flags.for_build(TvmCudaSettings(), "nvrtc") == cuda_flags.CudaFlags()


def _key(monkeypatch, **variables) -> str:
    for name in ALL:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").key


def test_the_variables_that_change_the_flags_are_in_the_key(monkeypatch):
    plain = _key(monkeypatch)
    changed = {_key(monkeypatch, TVM_CUDA_PTXAS_REG_LEVEL="4"), _key(monkeypatch, TVM_CUDA_PTXAS_EXTRA_OPTS="-O1"),
               _key(monkeypatch, TVM_CUDA_NVRTC_EXTRA_OPTS="--ftz=false")}
    assert len(changed) == 3 and plain not in changed
    for same in ({"TVM_CUDA_PTXAS_REG_LEVEL": "10"}, {"TVM_CUDA_COMPILE_MODE": "nvcc"},
                 {"TVM_CUDA_NVCC_NO_FAST_MATH": "1"}):           # the default, or no meaning with NVRTC
        assert _key(monkeypatch, **same) == plain, same


@pytest.mark.parametrize("variable, value, says", [
    ("TVM_CUDA_PTXAS_REG_LEVEL", "11", "not a register usage level from 0 to 10"),
    ("TVM_CUDA_PTXAS_EXTRA_OPTS", "'-O1", "cannot be read as flags")])
def test_unreadable_values_are_clear_errors(monkeypatch, variable, value, says):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidInputError, match=f"{variable}=.*{says}"):
        resolve_tvm_cuda()


def test_nvrtc_compiles_with_them(cache_dir, monkeypatch):
    monkeypatch.setenv("TVM_CUDA_PTXAS_REG_LEVEL", "4")
    monkeypatch.setenv("TVM_CUDA_NVRTC_EXTRA_OPTS", "-DFROM_TVM=1")
    monkeypatch.setenv("TVM_CUDA_PTXAS_EXTRA_OPTS", "--no-such-ptxas-flag")   # ptxas refuses it: it got there
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90")
    with pytest.raises(CompileError) as failed:
        exe.export_library(cache_dir.parent / "never.so")
    command = failed.value.command
    assert "--ptxas-options=--register-usage-level=4" in command and "--register-usage-level=10" not in command
    assert "--ptxas-options=--no-such-ptxas-flag" in command and command.index("-DFROM_TVM=1") > command.index(
        "--use_fast_math")                                   # after jitflow's own, so that it can undo them
    assert "no-such-ptxas-flag" in failed.value.log


def test_inspect_makes_ptx_with_the_flags_the_build_recorded(cache_dir, monkeypatch):
    """The PTX inspect compiles again (archs above the lowest) is the build's: with TVM's variables."""
    monkeypatch.setenv("TVM_CUDA_NVRTC_EXTRA_OPTS", "--ftz=false")      # undoes fast math's flush to zero
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"])
    exe.build()
    monkeypatch.delenv("TVM_CUDA_NVRTC_EXTRA_OPTS")                     # the report reads the entry, not this
    rep = exe.inspect()
    for arch in ("sm_80", "sm_90"):                                     # the fatbin's, and made again
        assert "add.f32" in rep.ptx[arch] and "add.ftz.f32" not in rep.ptx[arch], arch
    plain = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"]).inspect()
    assert "add.ftz.f32" in plain.ptx["sm_90"]
    assert cuda_flags.recorded({"TVM_CUDA_NVRTC_EXTRA_OPTS": "'--ftz=false"}, "nvrtc").extra == ("'--ftz=false",)
