"""Load-time compatibility: a GPU and driver that cannot run a library get a LoadError that names them,
what the library carries and the fix, before TVM is asked to load it. The GPU and driver are
simulated (SimulatedGpu), so these run without a GPU."""
from __future__ import annotations

import kernels
import models
import pytest
from conftest import run_python

import jitflow
from jitflow.errors import LoadError
from jitflow.runtime import compat
from jitflow.runtime.compat import DeviceCode, Gpu, SimulatedGpu
from jitflow.targets.cuda_floor import CudaVersion


@pytest.fixture
def libraries(cache_dir, tmp_path):
    """sm_80 SASS + PTX at the default floor (ISA 9.0), and the same with the PTX of CUDA 13.5."""
    out = {}
    for name, floor in [("floor130", None), ("floor135", "13.5")]:
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor=floor)
        out[name] = exe.export_library(tmp_path / f"{name}.so")
    return out


def test_device_code_of_a_library(libraries):
    code = compat.device_code(libraries["floor130"])
    assert code.sass == ("sm_80",) and code.ptx == (("compute_80", "9.0"),)
    assert code.sass_toolkit is not None and code.sass_toolkit.major == 13
    assert compat.device_code(libraries["floor135"]).ptx == (("compute_80", "9.5"),)


def test_a_library_records_its_device_code_and_a_load_checks_it_against_the_fatbins(libraries):
    from jitflow.runtime import library_check
    from jitflow.runtime.library_file import LibraryFile

    with LibraryFile.open(libraries["floor135"]) as library:
        recorded = library_check.check(library.fd).device_code
    assert recorded == compat.device_code(libraries["floor135"]).to_record()
    assert DeviceCode.from_record(recorded) == compat.device_code(libraries["floor135"])
    # in a fresh process the load is refused: the record agrees with the fatbins, which cannot run there
    proc = run_python(f"""
        import jitflow
        from jitflow.runtime.compat import SimulatedGpu
        try:
            jitflow.load({str(libraries["floor135"])!r}, device_query=SimulatedGpu("sm_90", "13.0"))
        except jitflow.errors.LoadError as exc:
            print("PTX ISA 9.5" in str(exc) and "digest record states" not in str(exc))
    """)
    assert proc.stdout.split() == ["True"]


def test_a_damaged_device_code_statement_is_never_believed():
    good = {"sass": ["sm_90"], "ptx": [["compute_90", "9.0"]], "sass_toolkit": "13.0"}
    assert DeviceCode.from_record(good) == DeviceCode(("sm_90",), (("compute_90", "9.0"),), CudaVersion(13, 0))
    for bad in [None, [], {**good, "more": 1}, {**good, "sass": "sm_90"}, {**good, "sass": {"sm_90": 1}},
                {**good, "sass": ["90"]}, {**good, "ptx": [["compute_90"]]}, {**good, "ptx": [["compute_90", "9.x"]]},
                {**good, "ptx": [["sm_90", "9.0"]]}, {**good, "sass_toolkit": "thirteen"}, {**good, "sass": ["sm_x"]}]:
        assert DeviceCode.from_record(bad) is None, bad


def test_the_check_reads_the_fatbins_and_never_believes_a_statement_they_contradict(libraries):
    old_driver = SimulatedGpu("sm_90", "13.0")
    with pytest.raises(LoadError, match="PTX ISA 9.5"):
        compat.check_library(libraries["floor135"], old_driver, recorded={"sass": "damaged"})
    # a statement claiming SASS the fatbin lacks (it has sm_80's): refused, never taken to run on sm_90
    with pytest.raises(LoadError, match=r"its digest record states SASS for sm_90 \(built by CUDA 13.0\), and the "
                                        r"library carries SASS for sm_80 .* the record was not written for these bytes"):
        compat.check_library(libraries["floor135"], old_driver,
                             recorded={"sass": ["sm_90"], "ptx": [], "sass_toolkit": "13.0"})


def test_too_new_ptx_on_an_old_driver_is_a_load_error_naming_everything(libraries):
    with pytest.raises(LoadError) as err:
        jitflow.load(libraries["floor135"], device_query=SimulatedGpu("sm_90", "13.0", "NVIDIA H200"))
    text = str(err.value)
    for part in ("NVIDIA H200, sm_90", "CUDA 13.0", "SASS for sm_80", "PTX compute_80 at PTX ISA 9.5",
                 "CUDA 13.5 or newer", "arch=[..., 'sm_90']", "cuda_floor='13.0'", "update the driver"):
        assert part in text, part


def test_a_driver_below_the_floor_is_a_load_error(libraries):
    with pytest.raises(LoadError, match=r"driver of CUDA 12\.4.*cuda-compat-13"):
        jitflow.load(libraries["floor130"], device_query=SimulatedGpu("sm_80", "12.4"))


def test_the_same_gpu_passes_the_check_when_the_ptx_fits(libraries):
    # the check passes; what follows is TVM's own loading (on this machine: no CUDA driver)
    compat.check_library(libraries["floor130"], SimulatedGpu("sm_90", "13.0"))
    compat.check_library(libraries["floor135"], SimulatedGpu("sm_86", "13.0"))   # sm_80 SASS runs on sm_86
    with pytest.raises(LoadError, match="sm_75"):
        compat.check_library(libraries["floor130"], SimulatedGpu("sm_75", "13.5"))


def test_jit_checks_before_loading(cache_dir):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor="13.5")
    with pytest.raises(LoadError, match="PTX ISA 9.5"):
        exe.jit(device_query=SimulatedGpu("sm_90", "13.0"))


def test_load_vm_checks_the_gpu_it_was_given(cache_dir, tmp_path):
    class TwoGpus:
        def gpu(self, index):
            return Gpu("sm_80" if index == 0 else "sm_90", CudaVersion(13, 0), "", index)

    exe = jitflow.compile(models.mlp(), "cuda", arch="sm_80", cuda_floor="13.5")
    path = exe.export_library(tmp_path / "mlp.so")
    with pytest.raises(LoadError, match=r"GPU 1 \(sm_90\)"):
        jitflow.load_vm(path, "cuda:1", device_query=TwoGpus())


@pytest.mark.parametrize("sass,gpu,runs", [
    (("sm_80",), "sm_89", True), (("sm_80",), "sm_90", False), (("sm_90a",), "sm_90", True),
    (("sm_90a",), "sm_100", False), (("sm_100",), "sm_103", True), (("sm_86",), "sm_80", False)])
def test_sass_runs_within_its_generation(sass, gpu, runs):
    code = DeviceCode(sass, (), CudaVersion(13, 5))
    assert compat.runs_sass(code, Gpu(gpu, CudaVersion(13, 0))) is runs
    assert not compat.runs_sass(code, Gpu(gpu, CudaVersion(12, 9)))   # CUDA 13 SASS needs a CUDA 13 driver


def test_ptx_runs_on_newer_gpus_with_a_driver_that_knows_its_isa():
    code = DeviceCode((), (("compute_80", "9.2"),), None)
    assert compat.runs_ptx(code, Gpu("sm_120", CudaVersion(13, 2)))
    assert not compat.runs_ptx(code, Gpu("sm_120", CudaVersion(13, 1)))
    assert not compat.runs_ptx(code, Gpu("sm_75", CudaVersion(13, 5)))
    reason = compat.problem(code, Gpu("sm_75", CudaVersion(13, 5)))
    assert "sm_75" in reason and "update the driver" not in reason      # a new driver would not help
