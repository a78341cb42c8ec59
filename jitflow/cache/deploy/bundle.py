"""`pack`: cache entries into one bundle (bundle_format.py), to unpack into another cache
(bundle_unpack.py) on a machine that should not build: a CI job packs what a workload recorded
(JITFLOW_RECORD), an image build unpacks it.

Each entry leaves through the cache's door (door.outgoing: its library checked against its
metadata), twice: once for the manifest's digests, which come first in the tar, then for the
members, which must be the same bytes. The bundle is written to a temporary file beside OUT and
renamed: a failure leaves nothing.
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ...errors import BundleError, EntryRefusedError, InvalidInputError
from ...files.export_path import replaced
from . import bundle_format, bundle_signature
from .bundle_format import KEY, MANIFEST, EntryLine, FileLine
from ..store.disk import Cache
from ..door import Outgoing, outgoing
from ..store.entry import target_of, target_text

log = logging.getLogger("jitflow")


@dataclass
class PackResult:
    """What pack() wrote: the bundle's path, its entries (as the manifest lists them), its size in
    bytes, the entries left out because they failed their checks (when packing every entry), and the
    fingerprint of the key that signed it (None: unsigned)."""

    path: Path
    entries: list[EntryLine]
    bytes: int
    skipped: list[str] = field(default_factory=list)
    signer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "entries": [dict(e.to_json(), size=e.size) for e in self.entries],
                "bytes": self.bytes, "skipped": self.skipped, "signer": self.signer}


def label_of(meta: dict[str, Any]) -> str:
    """An entry's name in words: the name it was built under, else its functions."""
    name = meta.get("name")
    return name if isinstance(name, str) and name else ",".join(str(f) for f in meta.get("functions") or [])


def _line(out: Outgoing) -> EntryLine:
    files = tuple(FileLine(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in out.files)
    return EntryLine(out.key, label_of(out.meta), target_text(target_of(out.meta)), files)


def _all_keys(cache: Cache) -> list[str]:
    if not cache.entries.is_dir():
        return []
    return sorted(p.name for shard in cache.entries.iterdir() if shard.is_dir()
                  for p in shard.iterdir() if KEY.fullmatch(p.name) and p.name.startswith(shard.name))


def chosen_keys(keys: Iterable[str] | None, manifest: str | os.PathLike | None) -> list[str] | None:
    """The keys asked for (each once, in order), or None when nothing was chosen (every entry)."""
    if keys is None and manifest is None:
        return None
    chosen: dict[str, None] = {}
    for key in keys or ():
        if not isinstance(key, str) or not KEY.fullmatch(key.lower()):
            raise InvalidInputError(f"{key!r} is not a cache key (64 hexadecimal digits, as `jitflow cache ls "
                                    "--json` and the record list them)")
        chosen[key.lower()] = None
    for key in bundle_format.record_keys(manifest) if manifest is not None else ():
        chosen[key] = None
    return list(chosen)


def resolved_key(cache: Cache, text: Any) -> str:
    """The key `text` names in `cache`: a whole key (64 hexadecimal digits), or a prefix of 6 or more
    that starts the key of exactly one entry (as `jitflow inspect` takes one); BundleError otherwise."""
    if not isinstance(text, str) or not re.fullmatch(r"[0-9a-fA-F]{6,64}", text):
        raise BundleError(f"{text!r} is not a cache key or a prefix of one (6 to 64 hexadecimal digits, as "
                          "`jitflow cache ls` lists them)")
    text = text.lower()
    if len(text) == 64:
        return text
    found = sorted(p.name for p in cache.entries.glob(f"{text[:2]}/{text}*") if KEY.fullmatch(p.name))
    if not found:
        raise BundleError(f"no entry of the cache {cache.folder} has a key that starts with {text} "
                          "(`jitflow cache ls` lists them)")
    if len(found) > 1:
        shown = ", ".join(key[:16] for key in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise BundleError(f"the key prefix {text} is ambiguous in the cache {cache.folder}: it starts {shown}; "
                          "give more of its digits")
    return found[0]


def _member(name: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.type = size, 0o644, int(mtime), tarfile.REGTYPE
    return info


def pack(out: str | os.PathLike, *, keys: Iterable[str] | None = None, manifest: str | os.PathLike | None = None,
         cache_dir: str | os.PathLike | None = None, sign: str | os.PathLike | None = None) -> PackResult:
    """Write the chosen entries of the cache into the bundle `out` (a POSIX tar); returns a PackResult.

    keys: cache keys, or unique prefixes of them (6 or more hexadecimal digits); manifest: a record
    file (JITFLOW_RECORD) whose keys are added. With neither,
    every entry (an entry that fails its checks is left out, with a warning). cache_dir: the cache
    (default: JITFLOW_CACHE_DIR, else the user cache folder). A chosen key that is not in the cache,
    or whose entry fails its checks, is a BundleError naming it, and nothing is written. sign: an
    Ed25519 private key file (OpenSSH or PEM, bundle_signature.py): the manifest is signed with it, for
    `unpack --trust` to verify who packed the bundle.
    """
    from ..._version import __version__
    from ...config import resolve
    from ...files.export_path import destination
    from ..store.location import open_cache

    dest = destination(out, what="cache pack", written="the bundle", example="bundle.tar")
    signing_key = None if sign is None else bundle_signature.private_key(sign)   # a bad key file: before any work
    cache = open_cache(resolve(cache_dir=cache_dir)).for_admin()
    if keys is not None and not isinstance(keys, str):
        keys = [resolved_key(cache, key) for key in keys]
    wanted = chosen_keys(keys, manifest)
    lines, skipped, missing = [], [], []
    for key in _all_keys(cache) if wanted is None else wanted:
        try:
            lines.append(_line(outgoing(cache.entry_dir(key), key)))
        except EntryRefusedError as exc:
            if wanted is not None:
                missing.append((key, str(exc)))
            else:
                log.warning("jitflow: %s; left out of the bundle", exc)
                skipped.append(key)
    if missing:
        raise BundleError(f"{len(missing)} chosen {'entry is' if len(missing) == 1 else 'entries are'} not in the "
                          f"cache {cache.folder} or fail their checks, nothing written: "
                          + "; ".join(f"{key}: {why}" for key, why in missing[:5]))
    size = _write(dest, cache, lines, __version__, signing_key)
    signer = None if signing_key is None else bundle_signature.fingerprint(signing_key.public_key())
    return PackResult(dest, lines, size, skipped, signer)


def _write(dest: Path, cache: Cache, lines: list[EntryLine], version: str, signing_key: Any = None) -> int:
    """Write the tar beside `dest` and rename it into place (or through it: a stream); its size."""
    import json

    now = time.time()
    head = json.dumps(bundle_format.manifest_json(version, lines), indent=1, sort_keys=True).encode()
    try:
        with replaced(dest, "cache pack", 0o644) as f:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_member(MANIFEST, len(head), now), io.BytesIO(head))
                if signing_key is not None:
                    signature = bundle_signature.sign(head, signing_key)
                    tar.addfile(_member(bundle_signature.SIGNATURE, len(signature), now), io.BytesIO(signature))
                for line in lines:
                    again = outgoing(cache.entry_dir(line.key), line.key)
                    if _line(again) != line:
                        raise BundleError(f"entry {line.key[:12]} changed while it was packed; pack again")
                    for name, data in again.files:
                        tar.addfile(_member(bundle_format.member_name(line.key, name), len(data), now),
                                    io.BytesIO(data))
            size = f.tell()
    except EntryRefusedError as exc:
        raise BundleError(f"{exc} (it went while it was packed); pack again") from None
    return size
