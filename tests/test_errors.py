"""Bad input and failing tools: a jitflow error that names the cause and the fix."""
from __future__ import annotations

import kernels
import numpy as np
import pytest
import tvm
from conftest import run_python

import jitflow
from jitflow import errors


def test_not_a_module():
    with pytest.raises(errors.InvalidInputError, match="IRModule or a tirx PrimFunc"):
        jitflow.compile("not a module", "c")


def test_empty_module():
    with pytest.raises(errors.InvalidInputError, match="empty"):
        jitflow.compile(tvm.IRModule({}), "c")


@pytest.mark.parametrize("target", ["rocm", "opencl -device=x", {"kind": "vulkan"}, 42, ""])
def test_unsupported_target(target):
    with pytest.raises(errors.TargetError, match="target|supported"):
        jitflow.compile(kernels.vecadd(), target)


@pytest.mark.parametrize("arch", ["sm_9O", "sm90", "hopper", []])
def test_arch_typo(arch):
    with pytest.raises(errors.TargetError) as info:
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=arch)
    assert "sm_" in str(info.value)
    if arch == "sm_9O":
        assert "letter O" in str(info.value)


def test_cuda_without_arch_and_without_gpu():
    # a process that sees no GPU (none here; on a GPU machine CUDA_VISIBLE_DEVICES hides them)
    proc = run_python("""
        import jitflow, kernels
        from jitflow import errors
        try:
            jitflow.compile(kernels.vecadd_cuda(), "cuda")
        except errors.TargetError as exc:
            print("TargetError:", exc)
    """, env={"CUDA_VISIBLE_DEVICES": ""})
    assert "TargetError:" in proc.stdout and "pass arch=" in proc.stdout


def test_arch_on_cpu_target():
    with pytest.raises(errors.TargetError, match="'cuda' target only"):
        jitflow.compile(kernels.vecadd(), "c", arch="sm_90")


def test_unknown_cuda_compiler():
    with pytest.raises(errors.InvalidInputError, match="nvrtc, nvcc"):
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cuda_compiler="clang")


def test_loops_not_bound_to_threads_name_the_function(cache_dir):
    exe = jitflow.compile(kernels.vecadd(), "cuda", arch="sm_90")  # unscheduled: loops run on the host
    with pytest.raises(errors.ScheduleError, match=r"'main'.*not bound to GPU threads.*sch.bind"):
        exe.jit()


def test_device_compile_failure_has_command_log_and_kept_source(cache_dir):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", device_options=["--no-such-flag"])
    with pytest.raises(errors.CompileError) as info:
        exe.export_library(cache_dir.parent / "never.so")
    err = info.value
    assert err.tool == "NVRTC" and "--no-such-flag" in err.command
    assert err.source_path.name == "kernels.cu"
    assert str(err.source_path) in str(err) and "log:" in str(err)
    assert not (cache_dir.parent / "never.so").exists()


def test_missing_nvcc_names_the_fix(cache_dir, monkeypatch, tmp_path):
    from jitflow.toolchain.cuda import nvcc as cuda_nvcc

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    cuda_nvcc.version.cache_clear()
    try:
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cuda_compiler="nvcc")
        with pytest.raises(errors.ToolMissingError, match="CUDA toolkit|NVRTC"):
            exe.jit()
    finally:
        cuda_nvcc.version.cache_clear()


def test_unknown_function_lists_the_ones_there_are(cache_dir):
    exe = jitflow.compile(kernels.vecadd(), "c")
    with pytest.raises(errors.FunctionNotFoundError, match=r"'mian'.*'main'"):
        exe["mian"]


def test_wrong_argument_at_call_time_is_tvms_error_not_a_crash(cache_dir):
    f = jitflow.compile(kernels.vecadd(), "c")["main"]
    a = tvm.runtime.tensor(np.zeros(1024, "float32"))
    wrong = tvm.runtime.tensor(np.zeros(10, "float32"))
    with pytest.raises(Exception, match="shape|Mismatched|match"):
        f(a, a, wrong)
    with pytest.raises(Exception, match="dtype|Mismatched|match"):
        f(a, a, tvm.runtime.tensor(np.zeros(1024, "int32")))


def test_all_errors_are_jitflow_errors():
    for name in ("InvalidInputError", "TargetError", "ScheduleError", "LoweringError", "ToolMissingError",
                 "CompileError", "FunctionNotFoundError", "CacheError", "LibraryFormatError", "LoadError"):
        assert issubclass(getattr(errors, name), errors.JitflowError)
