"""The cache key: stable across processes, different for anything that changes the library."""
from __future__ import annotations

import importlib.metadata

import kernels
import tvm
from conftest import run_python

import jitflow


def key(mod, target="c", **kw):
    return jitflow.compile(mod, target, **kw).key


def test_same_module_same_key_in_two_processes(cache_dir):
    here = key(kernels.vecadd_cuda(), "cuda", arch="sm_90")
    there = run_python("""
        import jitflow, kernels
        print(jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").key)
    """).stdout.strip()
    assert here == there and len(here) == 64


def test_everything_that_changes_the_library_changes_the_key(cache_dir):
    base = key(kernels.vecadd_cuda(), "cuda", arch="sm_90")
    variants = {
        "constant": key(kernels.axpb(2.0)) != key(kernels.axpb(2.5)),
        "shape": key(kernels.vecadd(1024)) != key(kernels.vecadd(2048)),
        "dtype": key(kernels.vecadd(1024, "float32")) != key(kernels.vecadd(1024, "float16")),
        "schedule step": base != key(kernels.vecadd_cuda(threads=256), "cuda", arch="sm_90"),
        "arch": base != key(kernels.vecadd_cuda(), "cuda", arch="sm_80"),
        "arch list": base != key(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"]),
        "target": key(kernels.vecadd()) != key(kernels.vecadd(), "cuda", arch="sm_90"),
        "pass option": base != key(kernels.vecadd_cuda(), "cuda", arch="sm_90",
                                   pass_config={"tirx.disable_cse_tir": True}),
        "device option": base != key(kernels.vecadd_cuda(), "cuda", arch="sm_90", device_options=["-lineinfo"]),
        "device compiler": base != key(kernels.vecadd_cuda(), "cuda", arch="sm_90", cuda_compiler="nvcc"),
    }
    assert [name for name, changed in variants.items() if not changed] == []


def test_equivalent_target_spellings_share_a_key(cache_dir):
    mod = kernels.vecadd_cuda()
    by_arg = key(mod, "cuda", arch="90")
    assert by_arg == key(mod, {"kind": "cuda", "arch": "sm_90"})
    assert by_arg == key(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}))
    assert key(mod, "cuda", arch=["sm_90", "sm_80"]) == key(mod, "cuda", arch=["sm_80", "sm_90", "sm_80"])


def test_the_key_names_tvm_ffi_and_another_version_is_another_key(cache_dir, monkeypatch):
    """Every library is compiled against tvm-ffi's headers and calls its C ABI, and TVM leaves its version
    open: a process with another tvm-ffi is not served this one's libraries."""
    from jitflow.toolchain import versions

    exe = jitflow.compile(kernels.vecadd(), "c")
    assert exe.cache_key.inputs["versions"]["tvm_ffi"] == importlib.metadata.version("apache-tvm-ffi")
    monkeypatch.setattr(versions, "tvm_ffi", lambda: "0.1.99")
    assert jitflow.compile(kernels.vecadd(), "c").key != exe.key
