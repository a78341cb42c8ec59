"""The CUDA floor: spellings, the PTX ISA each driver JITs, floors jitflow refuses and why."""
from __future__ import annotations

import pytest

from jitflow import config
from jitflow.errors import TargetError
from jitflow.targets import cuda_floor
from jitflow.targets.archs import is_portable, portable_archs
from jitflow.targets.cuda_floor import CudaVersion


@pytest.mark.parametrize("text,expected", [("13.0", CudaVersion(13, 0)), ("13", CudaVersion(13, 0)),
                                           (13, CudaVersion(13, 0)), (13.2, CudaVersion(13, 2)),
                                           (" 13.5 ", CudaVersion(13, 5))])
def test_floor_spellings(text, expected):
    assert cuda_floor.parse(text) == expected


@pytest.mark.parametrize("bad", ["thirteen", "13.0.1", "", "1e3", True])
def test_bad_floor_is_a_target_error(bad):
    with pytest.raises(TargetError, match="MAJOR.MINOR"):
        cuda_floor.parse(bad)


def test_cuda_12_floor_is_refused_with_the_reason(monkeypatch):
    with pytest.raises(TargetError, match="libcudart|CUDA 13 runtime") as err:
        config.resolve(cuda_floor="12.4")
    assert "cuda-compat-13" in str(err.value) and "docs/shipping.md" in str(err.value)
    monkeypatch.setenv("JITFLOW_CUDA_FLOOR", "12.8")
    with pytest.raises(TargetError, match="below 13.0"):
        config.resolve()


def test_floor_setting_argument_wins_over_environment(monkeypatch):
    monkeypatch.setenv("JITFLOW_CUDA_FLOOR", "13.2")
    assert config.resolve().cuda_floor == CudaVersion(13, 2)
    assert config.resolve(cuda_floor="13.4").cuda_floor == CudaVersion(13, 4)
    monkeypatch.setenv("JITFLOW_CUDA_FLOOR", "13.x")
    with pytest.raises(TargetError, match="JITFLOW_CUDA_FLOOR"):
        config.resolve()
    monkeypatch.delenv("JITFLOW_CUDA_FLOOR")
    assert config.resolve().cuda_floor is None


def test_ptx_isa_per_driver_and_back():
    assert cuda_floor.ptx_isa_for(CudaVersion(13, 0)) == (9, 0)
    assert cuda_floor.ptx_isa_for(CudaVersion(13, 5)) == (9, 5)
    assert cuda_floor.ptx_isa_for(CudaVersion(12, 6)) == (8, 5)
    assert cuda_floor.ptx_isa_for(CudaVersion(12, 8)) == (8, 7)
    assert cuda_floor.cuda_for_ptx_isa((9, 5)) == CudaVersion(13, 5)
    assert cuda_floor.cuda_for_ptx_isa((8, 6)) == CudaVersion(12, 8)   # no CUDA 12.7 driver was released
    assert cuda_floor.cuda_for_ptx_isa((7, 8)) is None


def test_table_agrees_with_cuda_python_where_it_knows():
    utils = pytest.importorskip("cuda.bindings.utils")
    known = getattr(utils, "get_minimal_required_cuda_ver_from_ptx_ver", None)
    if known is None:
        pytest.skip("this cuda-python has no PTX table")
    for isa in [(8, 0), (8, 4), (8, 5), (8, 7), (8, 8), (9, 0), (9, 1), (9, 2), (9, 3)]:
        try:
            theirs = known(f"{isa[0]}.{isa[1]}")
        except ValueError:
            continue
        ours = cuda_floor.cuda_for_ptx_isa(isa)
        assert ours.major * 1000 + ours.minor * 10 == theirs, isa


def test_portable_preset_picks_the_oldest_arch_of_each_generation():
    supported = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_103", "sm_110", "sm_120",
                 "sm_121")
    assert portable_archs(supported) == ("sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120")
    assert is_portable("portable") and is_portable(["portable"]) and not is_portable(["sm_80"])
