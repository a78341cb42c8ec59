"""Read the entries of a CUDA fatbin (which archs carry SASS, which carry PTX) without CUDA tools."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import LibraryFormatError

MAGIC = 0xBA55ED50
_KINDS = {1: "ptx", 2: "sass"}
_HEADER = struct.Struct("<IHHQ")          # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQIIII")       # kind, version, header size, payload size, ..., arch


@dataclass(frozen=True)
class FatbinEntry:
    kind: str        # "sass" or "ptx"
    arch: str        # "sm_90" for SASS, "compute_80" for PTX
    size: int
    offset: int = field(default=-1, compare=False)   # where the payload starts in the data


def entries(data: bytes) -> list[FatbinEntry]:
    """List every entry of every fatbin container found back to back in `data`."""
    out: list[FatbinEntry] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        magic, _version, header_size, body_size = _HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            if out:
                break
            raise LibraryFormatError("not a fatbin (bad magic number)")
        start, end = pos + header_size, pos + header_size + body_size
        if end > len(data):
            raise LibraryFormatError("fatbin truncated")
        cur = start
        while cur + _ENTRY.size <= end:
            kind, _ver, ehdr, payload, _u0, _u1, _u2, arch = _ENTRY.unpack_from(data, cur)
            if ehdr < _ENTRY.size or cur + ehdr + payload > end:
                raise LibraryFormatError("fatbin entry out of bounds")
            name = _KINDS.get(kind, f"kind{kind}")
            prefix = "compute_" if name == "ptx" else "sm_"
            out.append(FatbinEntry(name, f"{prefix}{arch}", payload, cur + ehdr))
            cur += ehdr + payload
        pos = (end + 7) & ~7
    return out


def payload(data: bytes, entry: FatbinEntry) -> bytes:
    """The bytes of one entry (a cubin ELF, PTX text, or either compressed) as `entries` found it."""
    if entry.offset < 0 or entry.offset + entry.size > len(data):
        raise LibraryFormatError("fatbin entry out of bounds")
    return data[entry.offset:entry.offset + entry.size]
