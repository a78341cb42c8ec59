"""Fatbin entries read without CUDA tools: PTX ISA from the decompressed text, cubins, compression."""
from __future__ import annotations

import kernels
import pytest

from jitflow.errors import LibraryFormatError
from jitflow.formats import cubin, fatbin, ptx

nvrtc = pytest.importorskip("jitflow.toolchain.cuda.nvrtc")


@pytest.fixture(scope="module")
def raw_fatbin():
    """A fatbin exactly as NVRTC + nvfatbin write it (no floor: the compiler's own PTX ISA)."""
    import tvm

    from jitflow.inputs import ir_module
    from jitflow.targets import resolve_target

    spec = resolve_target("cuda", "sm_80")
    lowered = tvm.compile(ir_module.prepare(kernels.vecadd_cuda()), target=spec.tvm_target())
    source = lowered.mod.imports[0].inspect_source()
    data, _log = nvrtc.compile_fatbin(source, ["sm_80", "sm_90"])
    return data


def test_ptx_isa_read_from_the_compressed_entry_matches_the_compiler(raw_fatbin):
    (entry,) = [e for e in fatbin.entries(raw_fatbin) if e.kind == "ptx"]
    assert entry.arch == "compute_80" and entry.compression == "zstd"
    text = fatbin.contents(raw_fatbin, entry)
    assert b".entry main_kernel" in text and len(text) > entry.stored_size
    version = nvrtc.cuda_version()
    assert ptx.isa(text) == (version.major - 4, version.minor)     # NVRTC 13.5 writes PTX ISA 9.5
    assert entry.isa == f"{version.major - 4}.{version.minor}"      # and the header says the same
    assert ptx.target(text) == "sm_80"


def test_sass_entries_are_cubins_with_the_compiler_version(raw_fatbin):
    sass = [e for e in fatbin.entries(raw_fatbin) if e.kind == "sass"]
    assert [e.arch for e in sass] == ["sm_80", "sm_90"]
    version = nvrtc.cuda_version()
    for e in sass:
        body = fatbin.contents(raw_fatbin, e)
        assert cubin.is_cubin(body) and "main_kernel" in cubin.kernels(body)
        assert cubin.toolkit_version(body) == (version.major, version.minor)


def test_a_damaged_compressed_entry_is_a_format_error(raw_fatbin):
    (entry,) = [e for e in fatbin.entries(raw_fatbin) if e.kind == "ptx"]
    broken = bytearray(raw_fatbin)
    broken[entry.offset + 8:entry.offset + 40] = bytes(32)
    with pytest.raises(LibraryFormatError, match="does not decompress"):
        fatbin.contents(bytes(broken), entry)


def test_ptx_version_is_rewritten_and_nothing_else():
    text = b"//\n.version 9.5\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n"
    lowered = ptx.with_isa(text, (9, 0))
    assert ptx.isa(lowered) == (9, 0) and lowered.replace(b"9.0", b"9.5", 1) == text
    with pytest.raises(LibraryFormatError, match=".version"):
        ptx.isa(b".target sm_80\n")
