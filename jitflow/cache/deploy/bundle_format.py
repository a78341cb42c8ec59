"""The bundle's format: one uncompressed POSIX tar (`tar -tf` lists it) of cache entries.

    manifest.json                 first member: {"format": "jitflow.bundle", "version": 1,
                                  "jitflow": "0.1.0", "entries": [{"key", "label", "target",
                                  "files": [{"path", "size", "sha256"}, ...]}, ...]}
    manifest.sig                  in a signed bundle, the second member: an Ed25519 signature over
                                  the manifest's bytes (bundle_signature.py)
    entries/<key>/lib.so          each entry's files (entry.TRAVELLING), as the manifest lists them
    entries/<key>/meta.json
    entries/<key>/src/host.c ...

Everything read back is untrusted: the manifest is parsed within size and nesting bounds, and
every field is checked for its type before use (parse_manifest). Also here: the keys of a record
file (JSON lines with a "key" each), what `pack --manifest` reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import BundleError, InvalidInputError
from ...formats import bounded_json
from ..store.entry import TRAVELLING

KIND = "jitflow.bundle"
#: bump when the layout changes; unpack refuses versions it does not know
VERSION = 1
MANIFEST = "manifest.json"
ENTRIES = "entries"
#: a manifest line per file is about 130 bytes: 64 MiB holds some hundred thousand entries
MANIFEST_MAX_BYTES = 64 << 20
MANIFEST_MAX_DEPTH = 8
#: one line of a record file
RECORD_LINE_MAX_BYTES = 1 << 20
KEY = re.compile(r"[0-9a-f]{64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FileLine:
    """One file of an entry, as the manifest lists it."""

    path: str     # relative to the entry folder
    size: int
    sha256: str


@dataclass(frozen=True)
class EntryLine:
    """One entry of a manifest."""

    key: str
    label: str
    target: str
    files: tuple[FileLine, ...]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "target": self.target,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files]}

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def member_name(key: str, path: str) -> str:
    """The tar member of file `path` of entry `key`."""
    return f"{ENTRIES}/{key}/{path}"


def manifest_json(version: str, entries: list[EntryLine]) -> dict[str, Any]:
    return {"format": KIND, "version": VERSION, "jitflow": version, "entries": [e.to_json() for e in entries]}


def _whole(v: Any) -> bool:
    return type(v) is int and v >= 0


def _entry(item: Any, n: int) -> EntryLine:
    where = f"the manifest's entry {n + 1}"
    if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not KEY.fullmatch(item["key"]):
        raise BundleError(f"{where} has no key of 64 hexadecimal digits")
    if not isinstance(item.get("label", ""), str) or not isinstance(item.get("target", ""), str):
        raise BundleError(f"{where} has a label or target that is not text")
    files = item.get("files")
    if not isinstance(files, list):
        raise BundleError(f"{where} has no file list")
    lines = []
    for f in files:
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and _whole(f.get("size"))
                and isinstance(f.get("sha256"), str) and _SHA256.fullmatch(f["sha256"])):
            raise BundleError(f"{where} has a file line that is not a path, a size and a sha256")
        if not TRAVELLING.fullmatch(f["path"]):
            raise BundleError(f"{where} lists {f['path']!r}, which is not a file a cache entry holds")
        lines.append(FileLine(f["path"], f["size"], f["sha256"]))
    paths = [f.path for f in lines]
    if len(set(paths)) != len(paths):
        raise BundleError(f"{where} lists a file twice")
    return EntryLine(item["key"], item.get("label", ""), item.get("target", ""), tuple(lines))


def parse_manifest(data: bytes) -> tuple[str, list[EntryLine]]:
    """(the jitflow version that wrote it, its entries) of a manifest's bytes; BundleError when it is
    not a manifest of a version this jitflow reads, or a key is listed twice."""
    try:
        found = bounded_json.loads(data, MANIFEST_MAX_BYTES, MANIFEST_MAX_DEPTH, "the manifest")
    except bounded_json.BadJSON as exc:
        raise BundleError(f"unreadable bundle manifest: {exc}") from None
    if not isinstance(found, dict) or found.get("format") != KIND:
        raise BundleError(f"{MANIFEST} is not a jitflow bundle manifest")
    version = found.get("version")
    if version != VERSION:
        raise BundleError(f"it is of format version {str(version)[:20]}, and this jitflow reads version {VERSION} "
                          f"only: unpack it with the jitflow that packed it ({str(found.get('jitflow'))[:40]}), "
                          "or pack it again with this one")
    items = found.get("entries")
    if not isinstance(items, list):
        raise BundleError(f"{MANIFEST} has no entry list")
    entries = [_entry(item, n) for n, item in enumerate(items)]
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise BundleError(f"the manifest lists entry {twice[:12]} twice")
    return str(found.get("jitflow", "?"))[:40], entries


def record_keys(path: str | Path) -> list[str]:
    """The keys a record file names (JSON lines, each an object with a "key" of 64 hexadecimal digits),
    each once, in order; blank lines are skipped. InvalidInputError naming the first bad line."""
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise InvalidInputError(f"cannot read the record {path}: {exc.strerror}") from None
    keys: dict[str, None] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = bounded_json.loads(line, RECORD_LINE_MAX_BYTES, 16, "the line")
        except bounded_json.BadJSON:
            item = None
        key = item.get("key") if isinstance(item, dict) else None
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise InvalidInputError(f"{path}, line {n}: not a JSON object with a \"key\" of 64 hexadecimal "
                                    "digits; give the file JITFLOW_RECORD wrote")
        keys[key] = None
    return list(keys)
