"""Read the entries of a CUDA fatbin (which archs carry SASS, which carry PTX, at which PTX ISA) and
their contents, decompressing what the compiler compressed, without CUDA tools.

An entry header (little-endian) is: u16 kind (1 PTX, 2 SASS), u16 version, u32 header size, u64
payload size (padded), u32 compressed size, u32, u32 version of the contents (for PTX the ISA:
minor in the low half, major in the high half), u32 arch, u32 name offset, u32 name size,
u64 flags, u64, u64 size once decompressed. nvfatbin and nvcc of CUDA 13 compress PTX with zstd
(flag 0x8000); flag 0x2000 marks the older compression, which is not read here.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import LibraryFormatError

MAGIC = 0xBA55ED50
_KINDS = {1: "ptx", 2: "sass"}
_HEADER = struct.Struct("<IHHQ")          # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQIIII")       # kind, version, header size, payload size, compressed size, ...,
                                          # contents version, arch
_TAIL = struct.Struct("<QQQ")             # at byte 40: flags, (unknown), size once decompressed
_ZSTD_FLAG, _OLD_COMPRESSION_FLAG = 0x8000, 0x2000
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: the arch numbers an entry may name (sm_10 to sm_999: what the arch spelling allows)
MIN_ARCH, MAX_ARCH = 10, 999
#: the most an entry is decompressed to (a real PTX text or cubin is far smaller)
MAX_CONTENTS = 1 << 30


class FatbinEntry(NamedTuple):
    kind: str        # "sass" or "ptx"
    arch: str        # "sm_90" for SASS, "compute_80" for PTX
    size: int        # bytes the entry takes in the fatbin (compressed, padded)
    offset: int = -1                 # where the payload starts in the data
    isa: str | None = None           # PTX entries: the PTX ISA the header records, e.g. "9.0"
    compression: str | None = None   # None, "zstd", or "unknown"
    stored_size: int = 0             # compressed bytes within the payload
    full_size: int = 0               # bytes once decompressed


def _compression(flags: int, body: bytes) -> str | None:
    if flags & _ZSTD_FLAG or body[:4] == _ZSTD_MAGIC:
        return "zstd"
    if flags & _OLD_COMPRESSION_FLAG:
        return "unknown"
    return None


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
            kind, _ver, ehdr, payload_size, stored, _u1, contents_version, arch = _ENTRY.unpack_from(data, cur)
            if ehdr < _ENTRY.size or cur + ehdr + payload_size > end:
                raise LibraryFormatError("fatbin entry out of bounds")
            flags, full = 0, 0
            if ehdr >= 40 + _TAIL.size:
                flags, _unused, full = _TAIL.unpack_from(data, cur + 40)
            name = _KINDS.get(kind, f"kind{kind}")
            if not MIN_ARCH <= arch <= MAX_ARCH:
                raise LibraryFormatError(f"a fatbin entry names arch {arch}, which is no GPU's (damaged?)")
            body_at = cur + ehdr
            compression = _compression(flags, data[body_at:body_at + 4])
            isa = f"{contents_version >> 16}.{contents_version & 0xFFFF}" if name == "ptx" else None
            prefix = "compute_" if name == "ptx" else "sm_"
            out.append(FatbinEntry(name, f"{prefix}{arch}", payload_size, body_at, isa, compression,
                                   stored if compression and stored else payload_size,
                                   full if compression and full else payload_size))
            cur += ehdr + payload_size
        pos = (end + 7) & ~7
    return out


def payload(data: bytes, entry: FatbinEntry) -> bytes:
    """The bytes of one entry as stored (a cubin ELF, PTX text, or either compressed)."""
    if entry.offset < 0 or entry.offset + entry.size > len(data):
        raise LibraryFormatError("fatbin entry out of bounds")
    return data[entry.offset:entry.offset + entry.size]


def contents(data: bytes, entry: FatbinEntry) -> bytes:
    """The entry's contents, decompressed: a cubin ELF, or PTX text (without trailing NULs)."""
    body = payload(data, entry)
    if entry.compression == "zstd":
        try:
            import zstandard
        except ImportError:
            raise LibraryFormatError("the fatbin's entries are zstd-compressed and the zstandard package is "
                                     "missing (pip install zstandard)") from None
        limit = min(max(entry.full_size, 1), MAX_CONTENTS)
        try:   # read as a stream, at most `limit` bytes: a frame header may claim any size
            with zstandard.ZstdDecompressor().stream_reader(body[:entry.stored_size]) as reader:
                pieces, got = [], 0
                while got <= limit:
                    piece = reader.read(limit + 1 - got)
                    if not piece:
                        break
                    pieces.append(piece)
                    got += len(piece)
            body = b"".join(pieces)
        except zstandard.ZstdError as exc:
            raise LibraryFormatError(f"a fatbin entry ({entry.kind} {entry.arch}) does not decompress: {exc}") \
                from None
        if len(body) > limit:
            raise LibraryFormatError(f"a fatbin entry ({entry.kind} {entry.arch}) decompresses to more than the "
                                     f"{limit} bytes its header records (damaged?)")
    elif entry.compression is not None:
        raise LibraryFormatError(f"the fatbin's {entry.kind} {entry.arch} entry is compressed in a format "
                                 "jitflow does not read (a fatbin of CUDA 12.7 or older)")
    return body.rstrip(b"\0") if entry.kind == "ptx" else body
