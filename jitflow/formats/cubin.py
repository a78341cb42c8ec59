"""Facts about the kernels in a cubin (the SASS ELF inside a fatbin) without CUDA tools.

The kernels are the cubin's function symbols; the register count and stack frame size are the
EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11) attributes of its `.nv.info` section, each a
record: u8 format (4: a sized value), u8 attribute, u16 size, u32 symbol index, u32 value.
"""
from __future__ import annotations

import io
import re
import struct
from typing import NamedTuple

from ..errors import LibraryFormatError

ELF_MAGIC = b"\x7fELF"
_REGCOUNT = 0x2F
_FRAME_SIZE = 0x11
_SIZED = 0x04


class CubinKernel(NamedTuple):
    name: str
    registers: int | None
    stack_frame: int | None


def is_cubin(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def kernels(cubin: bytes) -> dict[str, CubinKernel]:
    """name -> CubinKernel for every function symbol of the cubin."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(cubin))
        symtab = elf.get_section_by_name(".symtab")
        symbols = list(symtab.iter_symbols()) if isinstance(symtab, SymbolTableSection) else []
        attrs: dict[tuple[int, int], int] = {}
        info = elf.get_section_by_name(".nv.info")
        data = info.data() if info is not None else b""
        pos = 0
        while pos + 4 <= len(data):
            fmt, attr, size = struct.unpack_from("<BBH", data, pos)
            if fmt != _SIZED:
                pos += 4                      # formats without a size field carry 2 bytes of value
                continue
            if size == 8 and pos + 12 <= len(data):
                sym, value = struct.unpack_from("<II", data, pos + 4)
                attrs[(attr, sym)] = value
            pos += 4 + size
        out = {}
        for index, sym in enumerate(symbols):
            if sym["st_info"]["type"] == "STT_FUNC" and sym.name:
                out[sym.name] = CubinKernel(sym.name, attrs.get((_REGCOUNT, index)),
                                            attrs.get((_FRAME_SIZE, index)))
        return out
    except Exception as exc:  # noqa: BLE001 - pyelftools' errors on malformed input are of many types
        from .elf import failure_reason

        raise LibraryFormatError(f"a cubin in the fatbin is not readable: {failure_reason(exc)}") from None


_TOOLKIT = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+)")


def toolkit_version(cubin: bytes) -> tuple[int, int] | None:
    """The CUDA version of the ptxas that wrote the cubin, from its .note.nv.tkinfo note (None if absent)."""
    m = _TOOLKIT.search(cubin)
    return (int(m.group(1)), int(m.group(2))) if m else None
