"""Read and write the imports blob (`__tvm_ffi__library_bin`) that TVM embeds in a library.

Layout (little-endian): u64 length of the rest; the import tree as two u64-counted u64
arrays (row pointers, child indices); then one entry per module: a u64-length kind string
("_lib" is the host library itself, with no payload), and for any other kind a u64-length
payload. A "cuda" payload is: fmt string, the function-info map, then the binary string.
Malformed input only ever raises LibraryFormatError.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Callable, NamedTuple

from ..errors import LibraryFormatError

SYMBOL = "__tvm_ffi__library_bin"
_DTYPE_CODES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 5: "complex", 6: "bool"}
_MAX_COUNT = 1 << 24


class _Reader:
    """Reads from bytes, or from a memoryview without copying what it takes."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes | memoryview:
        start = self.skip(n)
        return self.data[start:start + n]

    def skip(self, n: int) -> int:
        """Move past n bytes without reading them (a tensor's data); returns where they start."""
        if n < 0 or self.pos + n > len(self.data):
            raise LibraryFormatError(
                f"{self.what}: truncated (needs {n} bytes at offset {self.pos}, has {len(self.data) - self.pos})")
        self.pos += n
        return self.pos - n

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def count(self) -> int:
        n = self.u64()
        if n > _MAX_COUNT:
            raise LibraryFormatError(f"{self.what}: implausible count {n} at offset {self.pos - 8}")
        return n

    def string(self) -> bytes | memoryview:
        return self.take(self.u64())

    def text(self) -> str:
        raw = self.string()
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise LibraryFormatError(f"{self.what}: a name is not valid UTF-8") from None

    def left(self) -> int:
        return len(self.data) - self.pos

    def done(self) -> bool:
        return self.left() == 0


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def nbytes(piece: bytes | memoryview) -> int:
    """The length in bytes of a piece of a blob (a memoryview counts its bytes, whatever its format)."""
    return piece.nbytes if isinstance(piece, memoryview) else len(piece)


def _string(b: bytes | str) -> bytes:
    raw = b.encode() if isinstance(b, str) else b
    return _u64(len(raw)) + raw


class BlobModule(NamedTuple):
    """One module of the import tree: its kind and (except for "_lib") its serialized payload."""

    kind: str
    payload: bytes | memoryview | None = None   # a view: bytes held elsewhere (vm_blob.py)


class LibraryBlob(NamedTuple):
    """The whole imports blob: the import tree (CSR form) and the modules in order."""

    row_ptr: list[int]
    child_indices: list[int]
    modules: list[BlobModule]

    def kinds(self) -> list[str]:
        return [m.kind for m in self.modules]


def parse(data: bytes) -> LibraryBlob:
    """Parse a blob (starting at its u64 length prefix)."""
    r = _Reader(bytes(data), "library blob")
    total = r.u64()
    if total != len(data) - 8:
        if total > len(data) - 8:
            raise LibraryFormatError(f"library blob: says {total} bytes, has {len(data) - 8}")
        r = _Reader(bytes(data[:8 + total]), "library blob")
        r.u64()
    row_ptr, child, layout = _layout(r)
    modules = [BlobModule(kind, None if kind == "_lib" else r.data[start:start + n]) for kind, start, n in layout]
    return LibraryBlob(row_ptr, child, modules)


def _layout(r: _Reader) -> tuple[list[int], list[int], list[tuple[str, int, int]]]:
    """The import tree and (kind, payload offset, payload length) of each module, payloads skipped."""
    row_ptr = [r.u64() for _ in range(r.count())]
    child = [r.u64() for _ in range(r.count())]
    n_modules = max(len(row_ptr) - 1, 0)
    if not row_ptr or row_ptr[0] != 0 or any(b < a for a, b in zip(row_ptr, row_ptr[1:])) \
            or row_ptr[-1] != len(child) or any(c >= n_modules for c in child):
        raise LibraryFormatError("library blob: the import tree is inconsistent")
    layout = []
    for _ in range(n_modules):
        kind = r.text()
        if kind == "_lib":
            layout.append((kind, 0, 0))
        else:
            n = r.u64()
            layout.append((kind, r.skip(n), n))
    if not r.done():
        raise LibraryFormatError(f"library blob: {r.left()} bytes left over after the modules")
    return row_ptr, child, layout


def serialize(blob: LibraryBlob) -> bytes:
    """The inverse of parse: bytes ready to embed as the library blob symbol."""
    return b"".join(chunks(blob))


def chunks(blob: LibraryBlob) -> list[bytes | memoryview]:
    """The serialized blob as consecutive pieces, payloads as given (a large one is never copied)."""
    parts: list[bytes | memoryview] = []
    small = [_u64(len(blob.row_ptr))] + [_u64(v) for v in blob.row_ptr]
    small += [_u64(len(blob.child_indices))] + [_u64(v) for v in blob.child_indices]
    for m in blob.modules:
        small.append(_string(m.kind))
        if m.kind != "_lib":
            payload = m.payload if m.payload is not None else b""
            small.append(_u64(nbytes(payload)))
            parts += [b"".join(small), payload]
            small = []
    parts.append(b"".join(small))
    return [_u64(sum(nbytes(p) for p in parts)), *(p for p in parts if nbytes(p))]


class KernelInfo(NamedTuple):
    """What the CUDA module records of one kernel: argument types and launch parameter tags."""

    name: str
    arg_types: list[str]
    launch_params: list[str]
    arg_extra_tags: list[int]
    raw: bytes = b""     # the entry as serialized in the function map


class CudaPayload(NamedTuple):
    """A "cuda" module's payload: binary format, function-info map (kept verbatim) and binary."""

    fmt: str
    fmap_raw: bytes
    kernels: list[KernelInfo]
    data: bytes

    def to_bytes(self) -> bytes:
        return _string(self.fmt) + self.fmap_raw + _string(self.data)

    def subset(self, names: list[str], fmt: str, data: bytes) -> CudaPayload:
        """A payload holding only the kernels `names` (in this payload's order), with binary `data`."""
        wanted = set(names)
        kernels = [k for k in self.kernels if k.name in wanted]
        return CudaPayload(fmt, _u64(len(kernels)) + b"".join(k.raw for k in kernels), kernels, data)


def _dtype(raw: bytes) -> str:
    code, bits, lanes = struct.unpack("<BBH", raw)
    name = f"{_DTYPE_CODES.get(code, f'code{code}')}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


def parse_cuda_payload(payload: bytes) -> CudaPayload:
    """Parse a "cuda" payload; the function map is decoded for inspection and kept byte-exact."""
    r = _Reader(payload, "cuda module")
    fmt = r.text()
    start = r.pos
    kernels = []
    for _ in range(r.count()):
        entry_start = r.pos
        key = r.text()
        name = r.text()
        arg_types = [_dtype(r.take(4)) for _ in range(r.count())]
        tags = [r.text() for _ in range(r.count())]
        extra = [struct.unpack("<i", r.take(4))[0] for _ in range(r.count())]
        kernels.append(KernelInfo(name or key, arg_types, tags, extra, payload[entry_start:r.pos]))
    fmap_raw = payload[start:r.pos]
    data = r.string()
    if not r.done():
        raise LibraryFormatError("cuda module: bytes left over after the binary")
    return CudaPayload(fmt, fmap_raw, kernels, data)


def blob_of(source: str | os.PathLike | Any) -> bytes | None:
    """The imports blob of a library file, or None when it has none (a CPU-only library).

    `source` is a path, or an open file holder with an `fd` (a runtime LibraryFile): then it is
    read through that descriptor, not its name. Only what the ELF headers point to is read.
    Malformed files raise LibraryFormatError."""
    from .elf_file import ElfFile

    def from_fd(fd: int) -> bytes | None:
        elf = ElfFile(fd)
        found = elf.symbol(SYMBOL)
        if found is None:
            return None
        at, total = _blob_range(elf, found[0])
        return elf.read(at, 8 + total, cap=elf.size)

    return _through_fd(source, from_fd)


class _FileReader(_Reader):
    """A _Reader over `length` bytes of a file at `base` (an ElfFile's bounded reads), read as taken,
    small pieces from a window read ahead (the import tree is many u64s)."""

    _AHEAD = 1 << 16

    def __init__(self, elf: Any, base: int, length: int, what: str) -> None:
        super().__init__(b"", what)
        self.elf, self.base, self.length = elf, base, length
        self.window, self.window_at = b"", 0

    def take(self, n: int) -> bytes:
        start = self.skip(n)
        if not self.window_at <= start <= start + n <= self.window_at + len(self.window):
            if n > self._AHEAD:
                return self.elf.read(self.base + start, n, cap=self.elf.size)
            self.window_at = start
            self.window = self.elf.read(self.base + start, min(self._AHEAD, self.length - start))
        return self.window[start - self.window_at:start - self.window_at + n]

    def skip(self, n: int) -> int:
        if n < 0 or self.pos + n > self.length:
            raise LibraryFormatError(f"{self.what}: truncated (needs {n} bytes at offset {self.pos}, "
                                     f"has {self.length - self.pos})")
        self.pos += n
        return self.pos - n

    def left(self) -> int:
        return self.length - self.pos


def _blob_range(elf: Any, at: int) -> tuple[int, int]:
    """(offset, length after the u64 prefix) of the blob at `at`, inside what the headers describe."""
    total = struct.unpack("<Q", elf.read(at, 8))[0]
    if at + 8 + total > elf.extent():
        raise LibraryFormatError(f"the symbol {SYMBOL} lies outside the library (truncated?)")
    return at, total


def payloads_of(source: str | os.PathLike | Any, kind: str) -> list[bytes] | None:
    """The payloads of the blob's modules of `kind` in a library file (a path, or a holder of an open
    `fd`), or None without a blob. Only those payloads are read: a model's weights (tens of
    megabytes) are skipped, not read. Malformed files raise LibraryFormatError."""
    from .elf_file import ElfFile

    def from_fd(fd: int) -> list[bytes] | None:
        elf = ElfFile(fd)
        found = elf.symbol(SYMBOL)
        if found is None:
            return None
        at, total = _blob_range(elf, found[0])
        r = _FileReader(elf, at + 8, total, "library blob")
        return [elf.read(at + 8 + start, n, cap=elf.size) for k, start, n in _layout(r)[2] if k == kind]

    return _through_fd(source, from_fd)


def _through_fd(source: str | os.PathLike | Any, read: Callable[[int], Any]) -> Any:
    """read(fd) of a path opened here (without blocking on a FIFO) or of a holder's open `fd`."""
    try:
        if hasattr(source, "fd"):
            return read(source.fd)
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            return read(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise LibraryFormatError(f"{os.fspath(source)} is not a readable ELF shared library: {exc}") from None
