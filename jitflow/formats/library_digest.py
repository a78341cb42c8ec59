"""The digest record that ends every library jitflow links: the sha256 of the library's own bytes,
and the facts a loader needs before dlopen.

    the library as the linker wrote it      `covered` bytes (the ELF headers describe all of them)
    body     JSON, `length` bytes           {"needs": ["contrib", "cuda"], "cpu": {"level": "x86-64-v3",
                                            "needs": ["avx2", ...]}, "cuda": {"sass": ["sm_90"], "ptx":
                                            [["compute_90", "9.0"]], "sass_toolkit": "13.0"}} (the device
                                            code its fatbins carry), "tvm_ffi": "0.1.14.post0" (the tvm-ffi
                                            it was compiled against); later fields join it, old readers
                                            ignore them (a change old readers cannot follow bumps VERSION)
    header   32 bytes                       MAGIC (16) | u32 VERSION | u32 length | u64 covered
    digest   32 bytes                       sha256 of every byte of the file before it

The dynamic loader reads only what the ELF headers point to, so the record is never mapped. It is
written once, when the library is linked, so a cache entry and every export of it are the same
bytes. Two things say that a record belongs there, so that a damaged one never passes as a library
built before records existed: the magic is recognised through up to MAX_FLIPPED_BITS flipped bits,
and the library holds an empty section named SECTION (inside the ELF, where a file that lost its
tail still shows it). Reading the record reads 64 bytes and the body; sizes are checked before
anything is hashed.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any, Callable, NamedTuple

from ..errors import LibraryFormatError
from . import bounded_json

MAGIC = b"\x96jitflow:digest\x69"
VERSION = 1
SECTION = ".jitflow.digest"
HEADER = struct.Struct("<16sIIQ")
DIGEST_SIZE = 32
TAIL = HEADER.size + DIGEST_SIZE
MAX_BODY = 64 << 10
#: no body jitflow writes nests deeper than 4 levels (the PTX list's pairs)
MAX_DEPTH = 8


class DigestError(LibraryFormatError):
    """A library's digest does not hold: its record is damaged or missing, or its bytes changed."""


#: a magic this close (in bits) to MAGIC is a record, damaged or not; 16 random bytes are ~64 bits away
MAX_FLIPPED_BITS = 24
_CHUNK = 1 << 20


class Record(NamedTuple):
    """A library's digest record: what it covers and the facts it states."""

    version: int
    covered: int
    length: int
    digest: bytes
    fields: dict[str, Any]

    @property
    def needs(self) -> frozenset[str]:
        """The TVM runtime parts the library needs: "cuda" (device code), "contrib" (sort, top-k, random);
        DigestError when the record states them in a form this reader does not know (it must not pass
        as needing none)."""
        needs = self.fields.get("needs", [])
        if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
            raise DigestError("its digest record is damaged (what it needs of the TVM runtime is not a list of names)")
        return frozenset(needs)

    @property
    def cpu_level(self) -> str | None:
        """The CPU level the library is built for ("x86-64", "x86-64-v3", ...); None when not recorded."""
        cpu = self.fields.get("cpu")
        return cpu.get("level") if isinstance(cpu, dict) and isinstance(cpu.get("level"), str) else None

    @property
    def cpu_needs(self) -> frozenset[str]:
        """The CPU features (as /proc/cpuinfo names them) the library's code needs; DigestError when the
        record states them in a form this reader does not know (it must not pass as needing none)."""
        cpu = self.fields.get("cpu", {})
        needs = cpu.get("needs", []) if isinstance(cpu, dict) else None
        if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
            raise DigestError("its digest record is damaged (the CPU features it needs are not a list of names)")
        return frozenset(needs)

    @property
    def tvm_ffi(self) -> str | None:
        """The version of tvm-ffi the library was compiled against; None when not recorded (built before
        records stated it); DigestError when stated in a form this reader does not know."""
        version = self.fields.get("tvm_ffi")
        if version is not None and not isinstance(version, str):
            raise DigestError("its digest record is damaged (the tvm-ffi it was built against is not a version)")
        return version

    @property
    def device_code(self) -> Any:
        """The device code the record states, as written (runtime/compat.DeviceCode.from_record reads it;
        a load checks it against the fatbins, which are read either way); None when it states none."""
        return self.fields.get("cuda")


def _distance(a: bytes, b: bytes) -> int:
    return bin(int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).count("1")


def read(read_at: Callable[[int, int], bytes], size: int) -> Record | None:
    """The record at the end of a file of `size` bytes (read_at(offset, n) gives its bytes), None when
    it ends in none; LibraryFormatError for a record that is there but damaged."""
    if size < TAIL:
        return None
    tail = read_at(size - TAIL, TAIL)
    magic, version, length, covered = HEADER.unpack_from(tail)
    if magic != MAGIC:
        if _distance(magic, MAGIC) > MAX_FLIPPED_BITS:
            return None
        raise DigestError("its digest record is damaged (its magic has changed)")
    if version < 1 or length > MAX_BODY or covered + length + TAIL != size:
        raise DigestError(f"its digest record is damaged (version {version}, body of {length} bytes, "
                          f"{covered} bytes covered of {size})")
    if version > VERSION:
        raise DigestError(f"its digest record has format version {version}, and this jitflow reads {VERSION}: "
                          "update jitflow (or the record is damaged)")
    try:
        fields = bounded_json.loads(read_at(covered, length), MAX_BODY, MAX_DEPTH, "its body")
    except bounded_json.BadJSON as exc:
        raise DigestError(f"its digest record is damaged ({exc})") from None
    if not isinstance(fields, dict):
        raise DigestError("its digest record is damaged (its body is not a JSON object)")
    return Record(version, covered, length, tail[HEADER.size:], fields)


def _hashed(fd: int, length: int) -> Any:
    """A sha256 fed the first `length` bytes of the file at `fd`, read once in chunks (LibraryFormatError
    when the file is shorter: it shrank while being read)."""
    h = hashlib.sha256()
    buffer = memoryview(bytearray(min(_CHUNK, max(length, 1))))
    done = 0
    while done < length:
        n = os.preadv(fd, [buffer[:min(len(buffer), length - done)]], done)
        if n <= 0:
            raise LibraryFormatError(f"truncated: the file ended at {done} bytes while its digest was checked")
        h.update(buffer[:n])
        done += n
    return h


def matches(fd: int, record: Record) -> bool:
    """Whether the file's bytes before the digest hash to the digest its record states."""
    return _hashed(fd, record.covered + record.length + HEADER.size).digest() == record.digest


def body(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def seal(path: str | os.PathLike, fields: dict[str, Any]) -> None:
    """Append the record (stating `fields`) to the library just linked at `path`."""
    raw = body(fields)
    if len(raw) > MAX_BODY:
        raise ValueError(f"digest record body of {len(raw)} bytes")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        covered = os.fstat(fd).st_size
        h = _hashed(fd, covered)
        tail = raw + HEADER.pack(MAGIC, VERSION, len(raw), covered)
        h.update(tail)
        os.pwrite(fd, tail + h.digest(), covered)
    finally:
        os.close(fd)

