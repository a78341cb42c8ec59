"""A 64-bit little-endian ELF file read through its descriptor, only where its headers point.

The reads before dlopen go through here: positioned reads (os.pread) of the header, the program and
section header tables and the few tables they name, each bounded by the file's size and by a cap,
never a map of the whole file (a map faults with SIGBUS when the file shrinks under it) and never a
scan. Malformed input only ever raises LibraryFormatError; a short file says "truncated".
"""
from __future__ import annotations

import os
import struct
from functools import cached_property
from typing import NamedTuple

from ..errors import LibraryFormatError

PHENTSIZE, SHENTSIZE, SYMENTSIZE = 56, 64, 24
PT_LOAD, PT_DYNAMIC = 1, 2
SHT_DYNSYM, SHT_NOBITS = 11, 8
DT_NULL, DT_STRTAB, DT_STRSZ = 0, 5, 10
#: no table jitflow reads before dlopen is larger in a real library (models' symbol tables are
#: tens of kilobytes): a header that asks for more is damaged, not read
MAX_TABLE = 16 << 20


class Truncated(LibraryFormatError):
    """The file ends before what its headers say it holds."""

    def __init__(self, needed: int, size: int) -> None:
        super().__init__(f"truncated: its headers need {needed} bytes and the file has {size}; "
                         "build or copy it again")
        self.needed, self.size = needed, size


class Segment(NamedTuple):
    kind: int
    offset: int
    vaddr: int
    filesz: int


class Section(NamedTuple):
    name: int
    kind: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


class ElfFile:
    """The headers of the ELF file open at `fd` (read at once), and bounded reads of what they name."""

    def __init__(self, fd: int, size: int | None = None) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size if size is None else size
        if self.size < 64:
            raise LibraryFormatError(f"not a shared library: the file has {self.size} bytes")
        head = self.read(0, 64)
        if head[:4] != b"\x7fELF":
            raise LibraryFormatError("not a shared library (no ELF header)")
        if head[4] != 2 or head[5] != 1:
            raise LibraryFormatError("not a 64-bit little-endian ELF library")
        self.type, self.machine = struct.unpack_from("<HH", head, 16)
        self.phoff, self.shoff = struct.unpack_from("<QQ", head, 32)
        phentsize, self.phnum, shentsize, self.shnum, self.shstrndx = struct.unpack_from("<HHHHH", head, 54)
        if self.phnum and phentsize != PHENTSIZE:
            raise LibraryFormatError(f"malformed ELF header: program headers of {phentsize} bytes, not {PHENTSIZE}")
        if self.shnum and shentsize != SHENTSIZE:
            raise LibraryFormatError(f"malformed ELF header: section headers of {shentsize} bytes, not {SHENTSIZE}")
        if not self.shoff:
            self.shnum = 0

    def read(self, offset: int, length: int, cap: int = MAX_TABLE) -> bytes:
        """Exactly `length` bytes at `offset` (Truncated past the end, LibraryFormatError above `cap`)."""
        if length > cap:
            raise LibraryFormatError(f"malformed ELF tables: a table of {length} bytes at offset {offset}")
        if offset < 0 or length < 0 or offset + length > self.size:
            raise Truncated(offset + length, self.size)
        data = os.pread(self.fd, length, offset) if length else b""
        if len(data) != length:     # the file shrank since it was opened
            raise Truncated(offset + length, offset + len(data))
        return data

    @cached_property
    def segments(self) -> list[Segment]:
        raw = self.read(self.phoff, self.phnum * PHENTSIZE)
        out = []
        for i in range(self.phnum):
            kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", raw, i * PHENTSIZE)
            out.append(Segment(kind, offset, vaddr, filesz))
        return out

    @cached_property
    def sections(self) -> list[Section]:
        raw = self.read(self.shoff, self.shnum * SHENTSIZE)
        out = []
        for i in range(self.shnum):
            name, kind, _flags, addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", raw, i * SHENTSIZE)
            out.append(Section(name, kind, addr, offset, size, link, entsize))
        return out

    def extent(self) -> int:
        """Where the last byte that the headers describe ends (Truncated when that is past the file's end)."""
        ends = [64, self.phoff + self.phnum * PHENTSIZE, self.shoff + self.shnum * SHENTSIZE if self.shnum else 0]
        needed = max(ends)
        if needed > self.size:
            raise Truncated(needed, self.size)
        ends += [s.offset + s.filesz for s in self.segments if s.kind in (PT_LOAD, PT_DYNAMIC)]
        ends += [s.offset + s.size for s in self.sections if s.kind != SHT_NOBITS]
        end = max(ends)
        if end > self.size:
            raise Truncated(end, self.size)
        return end

    def file_offset(self, vaddr: int) -> int | None:
        """The file offset of a virtual address inside a loaded segment, or None."""
        for s in self.segments:
            if s.kind == PT_LOAD and s.vaddr <= vaddr < s.vaddr + s.filesz:
                return s.offset + vaddr - s.vaddr
        return None

    def dynamic_strings(self) -> bytes | None:
        """The dynamic string table the loader uses (found through PT_DYNAMIC), or None without one."""
        dynamic = next((s for s in self.segments if s.kind == PT_DYNAMIC), None)
        if dynamic is None:
            return None
        raw = self.read(dynamic.offset, dynamic.filesz - dynamic.filesz % 16, cap=1 << 20)
        strtab = strsz = None
        for at in range(0, len(raw), 16):
            tag, value = struct.unpack_from("<qQ", raw, at)
            if tag == DT_NULL:
                break
            if tag == DT_STRTAB:
                strtab = value
            elif tag == DT_STRSZ:
                strsz = value
        start = None if strtab is None else self.file_offset(strtab)
        if start is None or strsz is None:
            return None
        return self.read(start, strsz)

    def section_names(self) -> bytes:
        """The section name table (empty where there is none)."""
        if not self.shnum or self.shstrndx >= self.shnum:
            return b""
        table = self.sections[self.shstrndx]
        return b"" if table.kind == SHT_NOBITS else self.read(table.offset, table.size, cap=1 << 20)

    def has_section(self, name: str) -> bool:
        return b"\0" + name.encode() + b"\0" in b"\0" + self.section_names()

    def section_data(self, name: str, cap: int = MAX_TABLE) -> bytes | None:
        """The bytes of the first section named `name` (None without one; LibraryFormatError above `cap`)."""
        names, wanted = self.section_names(), name.encode() + b"\0"
        for section in self.sections:
            if section.kind != SHT_NOBITS and names[section.name:section.name + len(wanted)] == wanted:
                return self.read(section.offset, section.size, cap=cap)
        return None

    def symbol(self, name: str) -> tuple[int, int] | None:
        """(file offset, st_size) of the defined dynamic symbol `name`, or None without it."""
        wanted = name.encode() + b"\0"
        for table in self.sections:
            if table.kind != SHT_DYNSYM or table.entsize != SYMENTSIZE or table.link >= self.shnum:
                continue
            link = self.sections[table.link]
            strings = b"" if link.kind == SHT_NOBITS else self.read(link.offset, link.size)
            raw = self.read(table.offset, table.size - table.size % SYMENTSIZE)
            for at in range(0, len(raw), SYMENTSIZE):
                st_name, _info, _other, shndx, value, st_size = struct.unpack_from("<IBBHQQ", raw, at)
                if not shndx or shndx >= self.shnum or strings[st_name:st_name + len(wanted)] != wanted:
                    continue
                owner = self.sections[shndx]
                return owner.offset + value - owner.addr, st_size
        return None
