"""The library blob read straight from the ELF tables through bounded reads (formats/elf_file.py),
against pyelftools' reading of the same file; damaged headers are format errors, never struct.error."""
from __future__ import annotations

import os
import struct

import kernels
import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitflow
from jitflow.errors import LibraryFormatError
from jitflow.formats import library_blob, library_digest
from jitflow.formats.elf_file import ElfFile
from jitflow.formats.library_blob import blob_of


def _with_pyelftools(path) -> bytes:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        (sym,) = elf.get_section_by_name(".dynsym").get_symbol_by_name(library_blob.SYMBOL)
        owner = elf.get_section(sym["st_shndx"])
        data = owner.data()
        at = sym["st_value"] - owner["sh_addr"]
        return data[at:at + 8 + int.from_bytes(data[at:at + 8], "little")]


@pytest.fixture(scope="module")
def cuda_library(tmp_path_factory, zig_cache):
    from conftest import module_cache

    with module_cache(tmp_path_factory, zig_cache):
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90")
        return exe.export_library(tmp_path_factory.mktemp("elf") / "vecadd.so")


def _elf(path) -> ElfFile:
    return ElfFile(os.open(path, os.O_RDONLY | os.O_CLOEXEC))


@pytest.mark.parametrize("host", ["x86_64-linux-gnu", "aarch64-linux-gnu"])
def test_blob_matches_a_general_elf_reader(cache_dir, tmp_path, host):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", host=host)
    path = exe.export_library(tmp_path / "vecadd.so")
    blob = blob_of(path)
    assert blob == _with_pyelftools(path)
    assert [m.kind for m in library_blob.parse(blob).modules] == ["_lib", "cuda"]
    assert library_blob.payloads_of(path, "cuda") == [library_blob.parse(blob).modules[1].payload]
    assert _elf(path).symbol("no_such_symbol") is None


def test_the_headers_describe_the_library_up_to_its_digest_record(cuda_library):
    elf = _elf(cuda_library)
    record = library_digest.read(elf.read, elf.size)
    assert elf.extent() == record.covered < elf.size and elf.has_section(library_digest.SECTION)


def test_truncated_or_foreign_files_are_format_errors(cuda_library, tmp_path):
    data = cuda_library.read_bytes()
    covered = library_digest.read(lambda at, n: data[at:at + n], len(data)).covered
    for cut in (40, len(data) // 2, covered - 16):
        (tmp_path / "cut.so").write_bytes(data[:cut])
        with pytest.raises(LibraryFormatError):
            _elf(tmp_path / "cut.so").extent()
        with pytest.raises(LibraryFormatError):
            blob_of(tmp_path / "cut.so")
    (tmp_path / "script.so").write_bytes(b"#!/bin/sh\n" + bytes(100))
    with pytest.raises(LibraryFormatError, match="no ELF header"):
        blob_of(tmp_path / "script.so")


@pytest.mark.parametrize("field,offset", [("program", 54), ("section", 58)])
def test_header_entry_sizes_of_one_byte_are_format_errors(cuda_library, tmp_path, field, offset):
    data = bytearray(cuda_library.read_bytes())
    struct.pack_into("<H", data, offset, 1)            # e_phentsize / e_shentsize
    (tmp_path / "bad.so").write_bytes(data)
    with pytest.raises(LibraryFormatError, match=f"{field} headers of 1 bytes"):
        _elf(tmp_path / "bad.so")
    with pytest.raises(LibraryFormatError, match=f"{field} headers of 1 bytes"):
        blob_of(tmp_path / "bad.so")


def _read_everything(path) -> None:
    """Every read the checks before dlopen make of a file: raises LibraryFormatError, or nothing."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        elf = ElfFile(fd)
        library_digest.read(elf.read, elf.size)
        elf.extent()
        elf.dynamic_strings()
        elf.has_section(library_digest.SECTION)
        library_blob.payloads_of(path, "cuda")
    finally:
        os.close(fd)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=1 << 20), st.integers(min_value=1, max_value=255)),
                min_size=1, max_size=8))
def test_damaged_headers_and_records_only_raise_format_errors(cuda_library, tmp_path, changes):
    data = bytearray(cuda_library.read_bytes())
    for at, value in changes:      # mostly the headers and tables at the start, sometimes the record at the end
        where = at % 4096 if at % 3 else len(data) - 1 - at % library_digest.TAIL
        data[where] ^= value
    (tmp_path / "damaged.so").write_bytes(data)
    try:
        _read_everything(tmp_path / "damaged.so")
    except LibraryFormatError:
        pass
