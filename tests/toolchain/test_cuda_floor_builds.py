"""Builds for a CUDA floor: the fatbin's PTX ISA, read back from the library, is one the floor's
driver JIT-compiles; the floor is in the key and the metadata; lowered PTX is proven by ptxas."""
from __future__ import annotations

import kernels
import pytest

import jitflow
from jitflow.errors import CompileError
from jitflow.formats import fatbin, library_blob, ptx
from jitflow.targets.archs import portable_archs
from jitflow.targets.cuda_floor import CudaVersion, ptx_isa_for
from jitflow.toolchain.cuda import nvrtc, ptx_floor


def _fatbin_of(path):
    blob = library_blob.parse(library_blob.blob_of(path))
    (payload,) = [library_blob.parse_cuda_payload(m.payload) for m in blob.modules if m.kind == "cuda"]
    assert payload.fmt == "fatbin"
    return payload.data


def _ptx_isas(path):
    data = _fatbin_of(path)
    return {e.arch: ptx.isa(fatbin.contents(data, e)) for e in fatbin.entries(data) if e.kind == "ptx"}


def _floors():
    """Every floor from 13.0 to the installed NVRTC's own version."""
    top = nvrtc.cuda_version()
    return [f"{top.major}.{m}" for m in range(0, top.minor + 1)]


def test_default_build_carries_ptx_the_oldest_driver_of_the_major_jits(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"])
    out = exe.export_library(tmp_path / "v.so")
    assert _ptx_isas(out) == {"compute_80": (9, 0)}
    meta = exe.build_info.library.parent / "meta.json"
    assert '"cuda_floor": "13.0"' in meta.read_text()
    log = (exe.build_info.library.parent / "src" / "kernels.log").read_text()
    assert "PTX compute_80: ISA 9.0 (CUDA floor 13.0)" in log


@pytest.mark.parametrize("floor", _floors())
def test_each_floor_gets_its_ptx_isa(cache_dir, tmp_path, floor):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor=floor)
    out = exe.export_library(tmp_path / "v.so")
    major, minor = (int(x) for x in floor.split("."))
    assert _ptx_isas(out) == {"compute_80": ptx_isa_for(CudaVersion(major, minor))}
    assert exe._key.inputs["options"]["cuda_floor"] == floor and str(exe.options.cuda_floor) == floor


def test_the_floor_is_part_of_the_key(cache_dir):
    keys = {jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor=f).key for f in _floors()}
    assert len(keys) == len(_floors())
    default = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80")
    assert default.key == jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor="13.0").key


def test_ptx_using_a_newer_feature_than_the_target_isa_is_refused():
    text = (b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
            b" .reg .pred %p<2>; .reg .b32 %r<2>;\n elect.sync %r1|%p1, 0xffffffff;\n ret;\n}\n")
    assert ptx_floor.to_isa(text, "sm_90", (8, 0)) == text       # already there: untouched
    with pytest.raises(CompileError, match=r"requires PTX ISA \.version 8\.0") as err:
        ptx_floor.to_isa(text, "sm_90", (7, 8))                    # elect.sync came in PTX ISA 8.0
    assert "raise cuda_floor" in str(err.value)


def test_a_fatbin_from_another_compiler_is_brought_to_the_floor(cache_dir):
    import tvm

    from jitflow.inputs import ir_module
    from jitflow.targets import resolve_target

    spec = resolve_target("cuda", "sm_80")
    source = tvm.compile(ir_module.prepare(kernels.vecadd_cuda()), target=spec.tvm_target()).mod.imports[0]
    raw, _ = nvrtc.compile_fatbin(source.inspect_source(), ["sm_80", "sm_90"])   # the compiler's own ISA
    floor = CudaVersion(13, 0)
    fixed = ptx_floor.fatbin_to_floor(raw, floor)
    assert ptx_floor.check_fatbin(fixed, floor) == [("compute_80", "9.0")]
    before = {e.arch: fatbin.contents(raw, e) for e in fatbin.entries(raw) if e.kind == "sass"}
    after = {e.arch: fatbin.contents(fixed, e) for e in fatbin.entries(fixed) if e.kind == "sass"}
    assert before == after                                               # SASS kept byte for byte
    if nvrtc.cuda_version() > floor:
        with pytest.raises(CompileError, match="JIT-compiles PTX ISA 9.0 at most"):
            ptx_floor.check_fatbin(raw, floor)


def test_portable_preset_builds_sass_per_generation_and_ptx_for_the_oldest(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="portable")
    expected = portable_archs(nvrtc.supported_archs())
    assert exe.target.archs == expected and len(expected) >= 5
    data = _fatbin_of(exe.export_library(tmp_path / "p.so"))
    found = [(e.kind, e.arch) for e in fatbin.entries(data)]
    assert sorted(a for k, a in found if k == "sass") == sorted(expected)
    assert [a for k, a in found if k == "ptx"] == ["compute_" + expected[0][3:]]
    rep = exe.inspect()
    assert {e.arch for e in rep.fatbin if e.kind == "sass"} == set(expected)
    assert all(e.size > 0 for e in rep.fatbin)
    assert "B in all" in str(rep)
