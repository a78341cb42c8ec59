"""CUDA arch spellings: the ones read as sm_XY give the same target and key; others are refused."""
from __future__ import annotations

import kernels
import pytest

import jitflow
from jitflow.errors import TargetError
from jitflow.targets import normalize_arch


@pytest.mark.parametrize("spelling", ["sm_90", "SM_90", "Sm_90", "90", 90, "9.0", "compute_90", "COMPUTE_90"])
def test_spellings_of_one_arch_are_one_arch(spelling):
    assert normalize_arch(spelling) == "sm_90"
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=spelling)
    assert exe.target.archs == ("sm_90",)
    assert exe.key == jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").key
    as_target = jitflow.compile(kernels.vecadd_cuda(), {"kind": "cuda", "arch": str(spelling)})
    assert as_target.key == exe.key


def test_arch_specific_suffixes_are_kept():
    assert normalize_arch("SM_90A") == "sm_90a" and normalize_arch("compute_100f") == "sm_100f"


@pytest.mark.parametrize("spelling", ["sm90", "hopper", "sm_9O", "compute90", "sm_90b", ""])
def test_other_spellings_are_refused_with_the_form(spelling):
    with pytest.raises(TargetError, match="sm_"):
        normalize_arch(spelling)


def test_an_empty_list_of_archs_is_refused():
    with pytest.raises(TargetError, match="list of CUDA archs is empty"):
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=[])


@pytest.mark.parametrize("arch", ["sm_70", "sm_30", ["sm_30", "sm_90"]])
def test_an_arch_the_compiler_does_not_build_is_refused_before_anything_is_built(cache_dir, arch):
    """Checked against the installed compiler's own list (NVRTC 13 starts at sm_75), before lowering."""
    import instruments

    from jitflow.toolchain.cuda.device_compiler import supported_archs

    supported = supported_archs("nvrtc")
    with instruments.context(instruments.Refuse()):          # lowering would fail the test
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=arch)
        with pytest.raises(TargetError) as refused:
            exe.export_library(cache_dir.parent / "never.so")
    said = str(refused.value)
    assert "is not built by the installed NVRTC" in said and ", ".join(supported) in said
    assert f"the oldest is {supported[0]}" in said and "older than sm_50" not in said
    assert "sm_90" not in said.split(" is not built")[0]      # only the arch it cannot build is named
