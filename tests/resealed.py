"""Libraries changed on purpose and then re-sealed: their digest record is written again over the
changed bytes (as formats/library_digest.seal writes it at link time), so that the digest holds and
every reader past the digest check meets the changed bytes. For the tests of the readers of
library bytes (inspect's, and those `jitflow.load` runs before the dynamic loader)."""
from __future__ import annotations

import random
import struct
from pathlib import Path

from jitflow.formats import library_digest

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
#: sections the dynamic loader never reads (not part of any loaded segment), and the section header
#: table: a change there must leave `jitflow.load` working, or be a LoadError
UNLOADED = (".comment", ".jitflow.memory", ".jitflow.digest", ".symtab", ".strtab", ".shstrtab", "section headers")


def record(data: bytes) -> library_digest.Record:
    found = library_digest.read(lambda at, n: data[at:at + n], len(data))
    assert found is not None, "not a library with a digest record"
    return found


def reseal(path: Path, body: bytes, fields: dict) -> Path:
    """Write `body` (a library's bytes before its record) to `path` and seal it with `fields`."""
    path.write_bytes(body)
    library_digest.seal(path, fields)
    return path


def regions(data: bytes) -> list[tuple[str, int, int]]:
    """(name, start, end) of the parts of a 64-bit ELF library worth changing: its header, program and
    section header tables, every section with bytes in the file, each fatbin and each cubin in them."""
    out = [("elf header", 0, 64)]
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 54)
    out += [("program headers", phoff, phoff + phentsize * phnum), ("section headers", shoff, shoff + shentsize * shnum)]
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    for name, kind, _flags, _addr, offset, size, *_ in heads:
        if kind != 8 and size:    # SHT_NOBITS has no bytes in the file
            out.append((data[names + name:data.index(b"\0", names + name)].decode(), offset, offset + size))
    at = data.find(FATBIN_MAGIC)
    while at != -1:
        header_size, total = struct.unpack_from("<HQ", data, at + 6)
        out.append(("fatbin", at, at + header_size + total))
        at = data.find(FATBIN_MAGIC, at + 4)
    at = data.find(b"\x7fELF", 1)
    while at != -1:
        out.append(("cubin", at, at + 4096))
        at = data.find(b"\x7fELF", at + 4)
    return [(n, s, min(e, len(data))) for n, s, e in out if 0 <= s < min(e, len(data))]


def mutated(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The library's bytes before its record with a few random changes in one part of it (a random
    byte, a flipped bit, a huge or random 8- or 4-byte number), and the part's name."""
    body = bytearray(good[:record(good).covered])
    parts = regions(good)
    name, low, high = rng.choice(parts) if rng.random() < 0.85 else ("anywhere", 0, len(body))
    high = min(high, len(body))
    for _ in range(rng.choice([1, 1, 2, 3, 8])):
        at, kind = rng.randrange(low, high), rng.random()
        if kind < 0.45:
            body[at] = rng.randrange(256)
        elif kind < 0.65:
            body[at] ^= 1 << rng.randrange(8)
        elif kind < 0.85 and at + 8 <= len(body):
            value = rng.choice([2 ** 64 - 1, 2 ** 63, 2 ** 32, 1 << rng.randrange(64), rng.randrange(2 ** 64)])
            body[at:at + 8] = value.to_bytes(8, "little")
        elif at + 4 <= len(body):
            body[at:at + 4] = rng.randrange(2 ** 32).to_bytes(4, "little")
    return bytes(body), name


def section_header(data: bytes, wanted: str) -> int:
    """The file offset of the section header of section `wanted`."""
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    names = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 24)[0]
    for i in range(shnum):
        at = shoff + i * shentsize
        name = struct.unpack_from("<I", data, at)[0]
        if data[names + name:data.index(b"\0", names + name)].decode() == wanted:
            return at
    raise LookupError(wanted)
