"""The library blob read straight from the ELF tables, against pyelftools' reading of the same file."""
from __future__ import annotations

import kernels
import pytest
from elftools.elf.elffile import ELFFile

import jitflow
from jitflow.errors import LibraryFormatError
from jitflow.formats import library_blob
from jitflow.formats.elf import symbol_bytes
from jitflow.formats.library_blob import blob_of


def _with_pyelftools(path) -> bytes:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        (sym,) = elf.get_section_by_name(".dynsym").get_symbol_by_name(library_blob.SYMBOL)
        owner = elf.get_section(sym["st_shndx"])
        data = owner.data()
        at = sym["st_value"] - owner["sh_addr"]
        return data[at:at + 8 + int.from_bytes(data[at:at + 8], "little")]


@pytest.mark.parametrize("host", ["x86_64-linux-gnu", "aarch64-linux-gnu"])
def test_blob_matches_a_general_elf_reader(cache_dir, tmp_path, host):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", host=host)
    path = exe.export_library(tmp_path / "vecadd.so")
    blob = blob_of(path)
    assert blob == _with_pyelftools(path)
    assert [m.kind for m in library_blob.parse(blob).modules] == ["_lib", "cuda"]
    assert symbol_bytes(path.read_bytes(), "no_such_symbol") is None


def test_truncated_or_foreign_files_are_format_errors(cache_dir, tmp_path):
    path = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").export_library(tmp_path / "v.so")
    data = path.read_bytes()
    for cut in (40, len(data) // 2, len(data) - 16):
        with pytest.raises(LibraryFormatError):
            symbol_bytes(data[:cut], library_blob.SYMBOL)
    with pytest.raises(LibraryFormatError, match="64-bit little-endian ELF"):
        symbol_bytes(b"#!/bin/sh\n" + bytes(100), library_blob.SYMBOL)
