"""A bundle's tar read once, front to back, as a stream: a file, or a pipe (`cat bundle.tar | jitflow
cache unpack /dev/stdin`), with what tarfile reads bounded before it reads it.

tarfile reads a member's extended headers (pax records, GNU long names) whole, whatever size their
header block announces, and parses them with int(), split() and decode(): a 768 MiB pax header
ahead of the manifest was read into memory before any check, and a GNU sparse map of "1,x" raised a
ValueError. Here:

- every 512-byte header block is checked as tarfile takes it (TarInfo.frombuf, which tarfile calls
  for each block before it reads what the block announces): an extended header larger than
  EXTENSION_MAX_BYTES, more than CHAIN_MAX of them ahead of one member, more than GLOBAL_MAX global
  ones, and a GNU sparse member are refused unread;
- what tarfile may read is bounded at every step: up to the end of the member it handed out, then
  at most HEADER_ALLOWANCE for the next member's headers (a GNU sparse 1.0 map, read from the data
  in a loop, ends there), so nothing is read before the manifest is checked but its headers and
  the manifest itself, whose size the caller checks before reading it;
- whatever tarfile raises on a hostile tar (its own errors, and ValueError, IndexError or anything
  else its parsers raise) is an Unreadable error saying why, and so is a bundle that cannot be read.
"""
from __future__ import annotations

import tarfile
from typing import IO, Callable, TypeVar

T = TypeVar("T")

#: the largest extended header (pax records, a GNU long name) a bundle may hold: pack writes one only
#: for a member name of more than 100 characters
EXTENSION_MAX_BYTES = 64 << 10
#: the most extended headers ahead of one member (a pax header, a GNU long name and link, a global one)
CHAIN_MAX = 4
#: the most global pax headers in a bundle (their records accumulate for the rest of the tar)
GLOBAL_MAX = 4
_BLOCK = tarfile.BLOCKSIZE
#: what tarfile may read past the end of one member's data for the next member's headers
HEADER_ALLOWANCE = CHAIN_MAX * (_BLOCK + EXTENSION_MAX_BYTES) + 2 * _BLOCK + tarfile.RECORDSIZE
_EXTENSIONS = {tarfile.XHDTYPE: "a pax header", tarfile.XGLTYPE: "a global pax header",
               tarfile.SOLARIS_XHDTYPE: "a pax header", tarfile.GNUTYPE_LONGNAME: "a GNU long name",
               tarfile.GNUTYPE_LONGLINK: "a GNU long link name"}


class Unreadable(Exception):
    """The bundle cannot be read as a tar a bundle may be (the message says why)."""


def _blocks(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


class _Bounded:
    """The bundle's bytes as tarfile reads them: never past `limit`, a read error an Unreadable."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self.consumed = 0
        self.limit = HEADER_ALLOWANCE

    def read(self, size: int = -1) -> bytes:
        want = self.limit - self.consumed if size is None or size < 0 else min(size, self.limit - self.consumed)
        if want <= 0 and size != 0:
            raise Unreadable("it holds more before a member than a bundle's headers may (an extended header, or a "
                             "sparse map, larger than a bundle has)")
        try:
            data = self._source.read(want)
        except OSError as exc:
            raise Unreadable(f"it cannot be read ({exc.strerror or exc})") from None
        self.consumed += len(data)
        return data


def _tarinfo() -> type[tarfile.TarInfo]:
    """A TarInfo whose header blocks are checked before tarfile reads what they announce (one class per
    tar: it counts the extended headers seen)."""

    class Checked(tarfile.TarInfo):
        chain = 0
        globals = 0

        @classmethod
        def frombuf(cls, buf: bytes, encoding: str, errors: str) -> tarfile.TarInfo:
            info = super().frombuf(buf, encoding, errors)
            if info.type == tarfile.GNUTYPE_SPARSE:
                raise Unreadable(f"the member {info.name[:100]!r} is a sparse file (GNU), which a bundle never holds")
            kind = _EXTENSIONS.get(info.type)
            if kind is None:
                cls.chain = 0
                return info
            cls.chain += 1
            cls.globals += info.type == tarfile.XGLTYPE
            if info.size > EXTENSION_MAX_BYTES:
                raise Unreadable(f"{kind} ahead of a member announces {info.size} bytes, and a bundle's are at most "
                                 f"{EXTENSION_MAX_BYTES} (refused unread)")
            if cls.chain > CHAIN_MAX or cls.globals > GLOBAL_MAX:
                raise Unreadable("it has more extended headers than a bundle holds "
                                 f"({CHAIN_MAX} ahead of a member, {GLOBAL_MAX} global ones at most)")
            return info

    return Checked


def _parsed(call: Callable[[], T]) -> T:
    """What `call()` gives, tarfile's errors on a hostile tar made Unreadable."""
    try:
        return call()
    except Unreadable:
        raise
    except (tarfile.TarError, EOFError) as exc:
        raise Unreadable(f"it is not a whole uncompressed tar ({exc})") from None
    except Exception as exc:    # noqa: BLE001 - tarfile's parsers raise what int(), split() and decode() raise
        raise Unreadable(f"a member's header cannot be read ({type(exc).__name__}: {exc})") from None


class BundleTar:
    """The members of the tar in `source`, in order: next() the next member (None at the end), read()
    its bytes. Everything raises Unreadable where the tar cannot be read as a bundle."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = _Bounded(source)
        self._tar = _parsed(lambda: tarfile.open(fileobj=self._source, mode="r|", tarinfo=_tarinfo()))
        self._current: IO[bytes] | None = None
        self._end = 0       # where the data of the member handed out last ends

    def next(self) -> tarfile.TarInfo | None:
        self._source.limit = max(self._source.consumed, self._end + tarfile.RECORDSIZE) + HEADER_ALLOWANCE
        member = _parsed(self._tar.next)
        if member is not None and member.sparse is not None:
            raise Unreadable(f"the member {member.name[:100]!r} is a sparse file (GNU), which a bundle never holds")
        self._current = None
        if member is not None:
            self._end = member.offset_data + (_blocks(member.size) if member.isreg() else 0)
            self._source.limit = max(self._source.consumed, self._end + tarfile.RECORDSIZE)
        return member

    def read(self, member: tarfile.TarInfo, size: int) -> bytes:
        """Up to `size` more bytes of `member`, the one next() handed out last (b"" at its end)."""
        if self._current is None:
            self._current = _parsed(lambda: self._tar.extractfile(member))
        current = self._current
        return _parsed(lambda: current.read(size)) if current is not None else b""
