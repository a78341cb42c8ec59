"""Checks on a library file before the dynamic loader sees it.

dlopen maps a file's segments and trusts its headers: a truncated library dies with SIGBUS on
first touch of a page past the end, a library for another CPU fails with a misleading message,
and any shared object "loads" as an empty TVM module. These checks read only the ELF headers and
the dynamic string table (microseconds) and say which of those it is.
"""
from __future__ import annotations

import mmap
import os
import platform
import struct

#: ELF e_machine -> the architecture name jitflow's host triples use
MACHINES = {62: "x86_64", 183: "aarch64", 3: "i386", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv64"}
_HERE = {"amd64": "x86_64", "arm64": "aarch64"}
_PT_LOAD, _PT_DYNAMIC = 1, 2
_SHT_NOBITS = 8
_DT_NULL, _DT_STRTAB, _DT_STRSZ = 0, 5, 10
_TVM_SYMBOL_PREFIX = b"__tvm_ffi_"


def this_machine() -> str:
    machine = platform.machine().lower()
    return _HERE.get(machine, machine)


def problem(fd: int) -> str | None:
    """Why the open file `fd` cannot be loaded here as a TVM library, or None when it can."""
    size = os.fstat(fd).st_size
    if size < 64:
        return f"not a shared library: the file has {size} bytes"
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
        return _problem(data, size)


def _problem(data: mmap.mmap, size: int) -> str | None:
    if data[:4] != b"\x7fELF":
        return "not a shared library (no ELF header)"
    if data[4] != 2 or data[5] != 1:
        return "not a 64-bit little-endian ELF library"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    machine = MACHINES.get(e_machine, f"ELF machine {e_machine}")
    if machine != this_machine():
        return (f"built for {machine}-linux-gnu, and this machine is {this_machine()}: load it on a machine "
                "of that architecture (jitflow inspect shows what a library needs)")
    if e_type != 3:
        return f"not a shared library (ELF type {e_type})"
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    needed = max(phoff + phnum * phentsize, shoff + shnum * shentsize if shoff else 0)
    if needed > size:
        return _truncated(needed, size)
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    for i in range(phnum):
        p_type, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type in (_PT_LOAD, _PT_DYNAMIC) and offset + filesz > size:
            return _truncated(offset + filesz, size)
        if p_type == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    for i in range(shnum if shoff else 0):
        sh_type, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        offset, length = struct.unpack_from("<QQ", data, shoff + i * shentsize + 24)
        if sh_type != _SHT_NOBITS and offset + length > size:
            return _truncated(offset + length, size)
    if dynamic is None or not _exports_tvm_symbols(data, dynamic, loads):
        return ("not a TVM library: it exports no __tvm_ffi_ symbols (build it with jitflow or "
                "tvm's export_library)")
    return None


def _truncated(needed: int, size: int) -> str:
    return f"truncated: its headers need {needed} bytes and the file has {size}; build or copy it again"


def _file_offset(vaddr: int, loads: list[tuple[int, int, int]]) -> int | None:
    for start, offset, filesz in loads:
        if start <= vaddr < start + filesz:
            return offset + vaddr - start
    return None


def _exports_tvm_symbols(data: mmap.mmap, dynamic: tuple[int, int], loads: list[tuple[int, int, int]]) -> bool:
    offset, length = dynamic
    strtab = strsz = None
    for at in range(offset, offset + length - 15, 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag == _DT_STRSZ:
            strsz = value
    if strtab is None or strsz is None:
        return False
    start = _file_offset(strtab, loads)
    if start is None or start + strsz > len(data):
        return False
    return data.find(_TVM_SYMBOL_PREFIX, start, start + strsz) >= 0
