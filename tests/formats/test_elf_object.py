"""The library blob written as an ELF object: what the linker and TVM's loader read from it."""
from __future__ import annotations

import pytest
from elftools.elf.elffile import ELFFile

from jitflow.formats import elf_object
from jitflow.formats import library_blob


@pytest.mark.parametrize("host, machine", [("x86_64-linux-gnu", "EM_X86_64"), ("aarch64-linux-gnu", "EM_AARCH64")])
def test_the_object_holds_the_bytes_under_the_symbol(tmp_path, host, machine):
    blob = bytes(range(256)) * 41 + b"odd length"
    with open(elf_object.write(blob, tmp_path / "blob.o", host), "rb") as f:
        elf = ELFFile(f)
        assert (elf.header["e_type"], elf.header["e_machine"], elf.elfclass) == ("ET_REL", machine, 64)
        section = elf.get_section_by_name(".rodata.tvm_ffi_library_bin")
        assert section.data() == blob and section["sh_addralign"] == 16 and section["sh_flags"] == 0x2
        assert elf.get_section_by_name(".note.GNU-stack")["sh_flags"] == 0       # no executable stack
        (symbol,) = elf.get_section_by_name(".symtab").get_symbol_by_name(library_blob.SYMBOL)
        assert (symbol["st_info"]["bind"], symbol["st_info"]["type"]) == ("STB_GLOBAL", "STT_OBJECT")
        assert (symbol["st_value"], symbol["st_size"]) == (0, len(blob))
        assert elf.get_section(symbol["st_shndx"]).name == ".rodata.tvm_ffi_library_bin"


def test_pieces_write_the_same_object_as_the_whole(tmp_path):
    pieces = [b"head", memoryview(bytes(range(256)) * 97), b"", b"tail, odd length"]
    whole = elf_object.write(b"".join(bytes(p) for p in pieces), tmp_path / "whole.o", "x86_64-linux-gnu")
    split = elf_object.write(pieces, tmp_path / "split.o", "x86_64-linux-gnu")
    assert split.read_bytes() == whole.read_bytes()
