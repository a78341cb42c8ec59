"""CUDA arch spellings: the ones read as sm_XY give the same target and key; others are refused."""
from __future__ import annotations

import kernels
import pytest

import jitflow
from jitflow.errors import TargetError
from jitflow.target import normalize_arch


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


@pytest.mark.parametrize("spelling", ["sm90", "hopper", "sm_9O", "compute90", "sm_90b", "sm_35", ""])
def test_other_spellings_are_refused_with_the_form(spelling):
    with pytest.raises(TargetError, match="sm_"):
        normalize_arch(spelling)


def test_an_empty_list_of_archs_is_refused():
    with pytest.raises(TargetError, match="list of CUDA archs is empty"):
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=[])
