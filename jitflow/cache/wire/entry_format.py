"""The bytes an entry travels as (the shared tier's entries, a build farm worker's reply), signed
with HMAC-SHA256 and checked before anything is used. Only the cache's door (door.py) writes and
reads them: entry_bytes() packs what outgoing() checked, install_bytes() unpacks for admit().

    b"JFSE" | HMAC-SHA256 (32 bytes; zeros when unsigned) | u32 header length | header JSON | files

The header holds the key, the format version, the entry's metadata and each file's name, size
and sha256 (lib.so, then src/*). The HMAC covers the key and everything after it, so an entry
cannot be altered or moved to another key without the shared secret.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
from typing import Any

from ...errors import RemoteEntryError
from ...formats import bounded_json
from ..store.entry import (FORMAT_VERSION, LIBRARY, META_MAX_BYTES, META_MAX_DEPTH, SOURCES, library_problem,
                           meta_shape_problem)

MAGIC = b"JFSE"
MAC_SIZE = 32
_UNSIGNED = bytes(MAC_SIZE)
_SAFE_NAME = re.compile(rf"({re.escape(LIBRARY)}|{SOURCES}/[A-Za-z0-9_][A-Za-z0-9_.-]*)")
#: a header is the entry's metadata plus a line per file: bounded like metadata, with room for the list
HEADER_MAX_BYTES = 2 * META_MAX_BYTES
HEADER_MAX_DEPTH = META_MAX_DEPTH + 2


def _mac(secret: str, key: str, body: bytes) -> bytes:
    return hmac.new(secret.encode(), MAGIC + key.encode() + b"\n" + body, hashlib.sha256).digest()


def pack(key: str, meta: dict[str, Any], entry_files: list[tuple[str, bytes]], secret: str | None,
         max_bytes: int) -> bytes | None:
    """The signed bytes of an entry's files (door.outgoing's, checked there) and metadata; sources
    are left out if they would pass `max_bytes`, and None is returned if the library alone would."""
    files = [(name, data) for name, data in entry_files if name == LIBRARY]
    with_sources = files + [(name, data) for name, data in entry_files if name.startswith(f"{SOURCES}/")]
    for chosen in (with_sources, files):
        header = {"key": key, "format": FORMAT_VERSION,
                  "meta": dict(meta, sources=[name for name, _ in chosen[1:]]),
                  "files": [[name, len(data), hashlib.sha256(data).hexdigest()] for name, data in chosen]}
        head = json.dumps(header, sort_keys=True, default=str).encode()
        body = struct.pack(">I", len(head)) + head + b"".join(data for _, data in chosen)
        if len(MAGIC) + MAC_SIZE + len(body) <= max_bytes:
            return MAGIC + (_mac(secret, key, body) if secret else _UNSIGNED) + body
    return None


def unpack(blob: bytes, key: str, secret: str | None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(metadata, {file name: bytes}) of a shared entry for `key`, after every check passed.

    With a secret the HMAC must match; without one (the user accepted unsigned entries) only the
    sha256 of each file is checked. Raises RemoteEntryError naming the first check that failed.
    """
    start = len(MAGIC) + MAC_SIZE
    if len(blob) < start + 4 or not blob.startswith(MAGIC):
        raise RemoteEntryError("not a jitflow shared entry")
    body = blob[start:]
    if secret and not hmac.compare_digest(blob[len(MAGIC):start], _mac(secret, key, body)):
        raise RemoteEntryError("signature does not match (altered, or signed with another key)")
    (head_size,) = struct.unpack(">I", body[:4])
    header, listed = _header(body[4:4 + head_size], key)
    offset, files = 4 + head_size, {}
    for name, size, digest in listed:
        if not _SAFE_NAME.fullmatch(name) or name in files:
            raise RemoteEntryError(f"bad file name or size in the header: {name!r}")
        data = body[offset:offset + size]
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise RemoteEntryError(f"{name}: sha256 or size does not match the header")
        files[name] = data
        offset += size
    if offset != len(body) or LIBRARY not in files:
        raise RemoteEntryError("entry has trailing bytes or no library")
    problem = library_problem(header["meta"], len(files[LIBRARY]), hashlib.sha256(files[LIBRARY]).hexdigest())
    if problem:
        raise RemoteEntryError(f"the library does not match the entry's metadata: {problem}")
    return header["meta"], files


def _header(data: bytes, key: str) -> tuple[dict[str, Any], list[tuple[str, int, str]]]:
    """The header and its file list [(name, size, sha256)], every field of its type (a size is a
    whole number of bytes, not 1e400); parsed only within the size and nesting bounds."""
    try:
        header = bounded_json.loads(data, HEADER_MAX_BYTES, HEADER_MAX_DEPTH, "header")
    except bounded_json.BadJSON as exc:
        raise RemoteEntryError(f"unreadable header ({exc})") from None
    if not isinstance(header, dict) or header.get("key") != key or header.get("format") != FORMAT_VERSION:
        raise RemoteEntryError("entry is for another key or format")
    problem = meta_shape_problem(header.get("meta"))
    files = header.get("files")
    if problem or not isinstance(files, list):
        raise RemoteEntryError(f"unreadable header ({problem or 'no file list'})")
    for item in files:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and type(item[1]) is int and item[1] >= 0 and isinstance(item[2], str)):
            raise RemoteEntryError(f"unreadable header (bad file line {json.dumps(item)[:60]})")
    return header, [(name, size, digest) for name, size, digest in files]
