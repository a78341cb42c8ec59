"""Bytes as a relocatable ELF object, written directly: one read-only section holding them and one
global symbol naming them (for the library blob, the symbol TVM's loader looks for).

Assembling an `.incbin` would cost a zig process and copy the bytes three more times; a model's
blob holds its weights (tens of megabytes), so the object is written here in one pass instead.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Sequence

from . import library_blob

_MACHINES = {"x86_64-linux-gnu": 62, "aarch64-linux-gnu": 183}     # EM_X86_64, EM_AARCH64
_SECTION = ".rodata.tvm_ffi_library_bin"
_ALIGN = 16


def _shdr(name: int, kind: int, flags: int, offset: int, size: int, link: int = 0, info: int = 0,
          align: int = 1, entsize: int = 0) -> bytes:
    return struct.pack("<IIQQQQIIQQ", name, kind, flags, 0, offset, size, link, info, align, entsize)


def write(blob: bytes | Sequence[bytes | memoryview], path: Path, host: str, section: str = _SECTION,
          symbol: str | None = library_blob.SYMBOL) -> Path:
    """Write `blob` (its bytes, or consecutive pieces of them) as an ELF64 little-endian relocatable
    object for `host` at `path`: in a read-only section named `section`, under the global `symbol`
    (None: no symbol, and the section is not loaded into memory, only kept in the file)."""
    pieces = [blob] if isinstance(blob, bytes) else list(blob)
    size = sum(library_blob.nbytes(p) for p in pieces)
    name = section.encode()
    shstrtab = b"\0" + name + b"\0.note.GNU-stack\0.symtab\0.strtab\0.shstrtab\0"
    names = {n: shstrtab.index(b"\0" + n + b"\0") + 1 for n in
             (name, b".note.GNU-stack", b".symtab", b".strtab", b".shstrtab")}
    strtab = b"\0" + (symbol or "").encode() + b"\0"
    # symbols: the null symbol, then the blob (global object, section 1, offset 0)
    symtab = bytes(24) + (struct.pack("<IBBHQQ", 1, (1 << 4) | 1, 0, 1, 0, size) if symbol else b"")
    data_at = 64
    pad = -(data_at + size) % 8
    symtab_at = data_at + size + pad
    strtab_at = symtab_at + len(symtab)
    shstrtab_at = strtab_at + len(strtab)
    headers_at = shstrtab_at + len(shstrtab) + (-(shstrtab_at + len(shstrtab)) % 8)
    sections = [bytes(64),
                _shdr(names[name], 1, 0x2 if symbol else 0, data_at, size, align=_ALIGN),   # PROGBITS, ALLOC
                _shdr(names[b".note.GNU-stack"], 1, 0, data_at, 0),                         # no executable stack
                _shdr(names[b".symtab"], 2, 0, symtab_at, len(symtab), link=4, info=1, align=8, entsize=24),
                _shdr(names[b".strtab"], 3, 0, strtab_at, len(strtab)),
                _shdr(names[b".shstrtab"], 3, 0, shstrtab_at, len(shstrtab))]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)                # 64-bit, little-endian, SysV
    header = ident + struct.pack("<HHIQQQIHHHHHH", 1, _MACHINES[host], 1, 0, 0, headers_at, 0, 64, 0, 0,
                                 64, len(sections), 5)
    with open(path, "wb") as f:
        f.write(header)
        for piece in pieces:
            f.write(piece)
        f.write(bytes(pad))
        f.write(symtab + strtab + shstrtab)
        f.write(bytes(headers_at - (shstrtab_at + len(shstrtab))))
        f.write(b"".join(sections))
    return path
