"""CUDA builds without a GPU: the .so carries a fatbin (SASS per arch + PTX), never CUDA source."""
from __future__ import annotations

import shutil

import kernels
import pytest

import jitflow
from jitflow.formats import fatbin, library_blob


def _cuda_payloads(path):
    blob = library_blob.parse(library_blob.blob_of(path))
    assert blob.kinds() == ["_lib", "cuda"]
    return [library_blob.parse_cuda_payload(m.payload) for m in blob.modules if m.kind == "cuda"]


def _check_fatbin_library(path, archs, lowest):
    (payload,) = _cuda_payloads(path)
    assert payload.fmt == "fatbin"
    found = {(e.kind, e.arch) for e in fatbin.entries(payload.data)}
    assert found == {("sass", a) for a in archs} | {("ptx", lowest.replace("sm_", "compute_"))}
    raw = path.read_bytes()
    assert b"__global__" not in raw and b"#include" not in raw  # no CUDA source inside
    return payload


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_two_arch_library_holds_sass_for_both_and_ptx(cache_dir, tmp_path, compiler):
    if compiler == "nvcc" and shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed here")
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_90", "sm_80"], cuda_compiler=compiler)
    out = exe.export_library(tmp_path / "vecadd.so")
    payload = _check_fatbin_library(out, ["sm_80", "sm_90"], "sm_80")
    (kernel,) = payload.kernels
    assert kernel.name == "main_kernel" and kernel.launch_params == ["blockIdx.x", "threadIdx.x"]
    assert exe.build_info.outcome == "built" and set(exe.build_info.stages) >= {"lower", "host", "pack", "link"}
    src = exe.build_info.library.parent / "src"
    assert "main_kernel" in (src / "kernels.cu").read_text()   # the source is kept in the cache entry
    if compiler == "nvcc":
        import subprocess

        if shutil.which("cuobjdump"):   # NVIDIA's own reader of the fatbin the library carries in TVM's blob
            image = tmp_path / "vecadd.fatbin"
            image.write_bytes(payload.data)
            listing = subprocess.run(["cuobjdump", "--list-elf", "--list-ptx", str(image)],
                                     capture_output=True, text=True)
            assert "sm_80" in listing.stdout and "sm_90" in listing.stdout, listing.stderr


def test_shared_memory_matmul_builds_for_the_gpu(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.matmul_shared(), "cuda", arch="sm_90")
    out = exe.export_library(tmp_path / "mm.so")
    _check_fatbin_library(out, ["sm_90"], "sm_90")
    assert "__shared__" in (exe.build_info.library.parent / "src" / "kernels.cu").read_text()


def test_tvm_blob_round_trips_byte_for_byte(cache_dir):
    import tvm
    import tvm_ffi

    from jitflow.inputs import ir_module
    from jitflow.targets import resolve_target

    spec = resolve_target("cuda", "sm_90")
    host = tvm.compile(ir_module.prepare(kernels.vecadd_cuda()), target=spec.tvm_target()).mod
    raw = bytes(tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(host).numpy().tobytes())
    blob = library_blob.parse(raw)
    assert library_blob.serialize(blob) == raw
    payload = library_blob.parse_cuda_payload(blob.modules[1].payload)
    assert payload.to_bytes() == blob.modules[1].payload
