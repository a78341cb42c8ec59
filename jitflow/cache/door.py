"""The cache's one door: entries made elsewhere (the shared tier, a build farm's worker, a bundle)
come in through admit(), and entries leave for elsewhere through outgoing().

What travels as bytes (a farm worker's reply, the shared tier's entries) crosses through the same
two: entry_bytes() is outgoing() written in the wire format (wire/entry_format.py), and
install_bytes() reads the wire format (every file's sha256, the signature) and hands the files to
admit(). Nothing outside the cache encodes or decodes an entry's files.

admit() checks an entry as a lookup would (metadata of the right shape for this key and format, and
the key's inputs: those the caller knows, else (a bundle) inputs whose sha256 is the key; the
library's size and sha256; only the files an entry holds, none of them a link), then publishes it
the way a build does: under the key's lock, by one rename from a staging folder inside the cache,
unless a sound entry is there already; and
after the lock is released the size cap is kept. outgoing() reads an entry's files and checks them
the same way before they are sent: a damaged entry never leaves.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import EntryRefusedError
from ..runtime.library_file import LibraryFile
from .store.disk import Cache, sha256_fd
from .key.key import digest_of
from .store.entry import (LIBRARY, META, META_MAX_BYTES, SOURCES, TRAVELLING, Entry, as_json, decode_meta,
                          library_problem, meta_problem, meta_text, open_file)
from .wire import entry_format


@dataclass
class Admitted:
    """What admit() did: `found` is the entry's library (held open: release it) and metadata;
    `installed` is False when a sound entry was there already (nothing was written)."""

    found: tuple[LibraryFile, dict[str, Any]]
    installed: bool

    def close(self) -> None:
        self.found[0].close()


@dataclass
class Outgoing:
    """An entry's files as they leave the cache: (name in the entry folder, bytes), library first,
    meta.json among them, and the metadata they carry."""

    key: str
    meta: dict[str, Any]
    files: list[tuple[str, bytes]]


def _problem(key: str, meta: dict[str, Any] | None, expect: dict[str, Any] | None) -> str | None:
    if meta is None:
        return "no metadata"
    problem = meta_problem(meta, key)
    if problem is None and expect is not None and meta.get("key_inputs") != as_json(expect):
        problem = "metadata records other tool versions, target or options than this process's"
    return problem


@dataclass(frozen=True)
class Checked:
    """An entry laid out in a staging folder that passed check_folder(): admit() takes it as it is
    (a bundle checks every entry before it installs the first)."""

    key: str
    folder: Path
    meta: dict[str, Any]


def _check_names(folder: str, prefix: str, key: str) -> None:
    """Every name under `folder` is a regular file an entry holds (entry.TRAVELLING), `src/` aside."""
    with os.scandir(folder) as found:
        for item in found:
            name = prefix + item.name
            if name == SOURCES and not prefix and item.is_dir(follow_symlinks=False):
                _check_names(item.path, f"{SOURCES}/", key)
            elif not (TRAVELLING.fullmatch(name) and item.is_file(follow_symlinks=False)):
                raise EntryRefusedError(f"entry {key[:12]}: {name!r} is not a file an entry holds")


def _opened(folder: Path, name: str, key: str) -> int:
    """The entry file `name` of `folder`, opened as entry.open_file opens it; EntryRefusedError if it cannot be."""
    try:
        return open_file(folder / name)
    except FileNotFoundError:
        raise EntryRefusedError(f"entry {key[:12]}: no {name}") from None
    except OSError as exc:
        raise EntryRefusedError(f"entry {key[:12]}: {name}: {exc.strerror}") from None


def check_folder(folder: Path, key: str, expect: dict[str, Any] | None = None) -> Checked:
    """The entry laid out in `folder` (a private staging folder of this process) with its metadata,
    after every check admit() makes; EntryRefusedError naming the first that failed."""
    _check_names(str(folder), "", key)
    with os.fdopen(_opened(folder, META, key), "rb") as f:
        meta, problem = decode_meta(f.read(META_MAX_BYTES + 1))
    problem = problem or _problem(key, meta, expect)
    if problem is None and expect is None and digest_of((meta or {}).get("key_inputs")) != key:
        # where the caller cannot say what the inputs are (a bundle), they must at least be the key's
        problem = ("metadata records other key inputs than its key was taken over (a lookup would refuse it: "
                   "its sha256 is not the key)")
    if problem is None:
        fd = _opened(folder, LIBRARY, key)
        try:
            problem = library_problem(meta, os.fstat(fd).st_size, sha256_fd(fd))
        finally:
            os.close(fd)
    if problem:
        raise EntryRefusedError(f"entry {key[:12]}: {problem}")
    assert meta is not None
    return Checked(key, Path(folder), meta)


def admit(cache: Cache, key: str, source: Path | Mapping[str, bytes] | Checked, meta: dict[str, Any] | None = None, *,
          expect: dict[str, Any] | None = None, locked: bool = False, max_size: int | None = None,
          readable: bool = False) -> Admitted:
    """Install an entry made elsewhere into `cache`, checked, as a build publishes one.

    source: a folder inside the cache's staging folder laid out as an entry (it is moved into place;
    a Checked one is not checked again), or {name in the entry folder: bytes} with `meta` (the shared
    tier's and a worker's entries carry their metadata beside the files). expect: the key's inputs,
    when the caller knows them.
    locked: the caller holds the key's lock already (a build's turn at the shared tier). max_size:
    the cache's cap, kept once the lock is released (None: the caller keeps it, once for many).
    readable: installed readable (never writable) by every user (Cache.publish).
    Raises EntryRefusedError (nothing installed) when a check fails.
    """
    if isinstance(source, Mapping):
        with cache.staging(key) as folder:
            for name, data in source.items():
                if not TRAVELLING.fullmatch(name):
                    raise EntryRefusedError(f"entry {key[:12]}: {name!r} is not a file an entry holds")
                path = folder / name
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(data)
            if meta is not None:
                Entry(folder).meta_path.write_text(meta_text(meta))
            return admit(cache, key, folder, expect=expect, locked=locked, max_size=max_size)
    checked = source if isinstance(source, Checked) else check_folder(Path(source), key, expect)
    if checked.key != key:
        raise EntryRefusedError(f"entry {checked.key[:12]} offered as {key[:12]}")
    meta = dict(checked.meta, fetched=time.time())
    if locked:
        admitted = _install(cache, key, checked.folder, meta, expect, readable)
    else:
        with cache.lock(key):
            admitted = _install(cache, key, checked.folder, meta, expect, readable)
    if admitted.installed and max_size is not None:
        from .store import admin

        admin.after_publish(cache, key, max_size)
    return admitted


def _install(cache: Cache, key: str, folder: Path, meta: dict[str, Any],
             expect: dict[str, Any] | None, readable: bool = False) -> Admitted:
    # under the key's lock nobody else publishes it: where no folder is, there is nothing to look up
    found = cache.lookup(key, expect) if os.path.lexists(cache.entry_dir(key)) else None
    if found is not None:
        return Admitted(found, installed=False)
    return Admitted(cache.publish(key, folder, meta, readable), installed=True)


def outgoing(folder: Path, key: str) -> Outgoing:
    """The files of the entry folder `folder` that travel (entry.TRAVELLING), read without following
    links and checked as admit() checks them: EntryRefusedError when the entry is damaged, or gone."""
    entry = Entry(Path(folder))
    files: list[tuple[str, bytes]] = []
    for name in entry.travelling_files():
        try:
            fd = open_file(entry.folder / name)
        except OSError as exc:
            raise EntryRefusedError(f"entry {key[:12]}: {name}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            files.append((name, f.read()))
    data = dict(files)
    if META not in data or LIBRARY not in data:
        raise EntryRefusedError(f"entry {key[:12]} is not in the cache (or has no {META} or {LIBRARY})")
    meta, problem = decode_meta(data[META])
    problem = problem or _problem(key, meta, None)
    library = data[LIBRARY]
    problem = problem or library_problem(meta or {}, len(library), hashlib.sha256(library).hexdigest())
    if problem:
        raise EntryRefusedError(f"entry {key[:12]}: {problem}; remove it with `jitflow cache prune` or rebuild it")
    assert meta is not None
    return Outgoing(key, meta, files)


def entry_bytes(folder: Path, key: str, *, secret: str | None = None, max_bytes: int) -> bytes | None:
    """The entry in `folder` as the bytes that travel (a worker's reply, the shared tier's upload):
    read and checked by outgoing() (EntryRefusedError when it is damaged or gone), signed with
    `secret` when given; sources are left out if they would pass `max_bytes`, and None is returned
    if the library alone would."""
    out = outgoing(folder, key)
    return entry_format.pack(key, out.meta, out.files, secret, max_bytes)


def install_bytes(cache: Cache, key: str, blob: bytes | None, *, secret: str | None = None,
                  expect: dict[str, Any] | None = None, locked: bool = False,
                  max_size: int | None = None) -> Admitted:
    """Install `blob` (what entry_bytes() made elsewhere) as the entry of `key` in `cache`: every
    file's sha256 and, with a secret, the signature checked (RemoteEntryError), then admit() with
    `expect`, `locked` and `max_size` (EntryRefusedError, nothing installed). blob None: another
    process published the entry into this cache folder (a worker sharing it): it is checked as a
    lookup checks it, and EntryRefusedError says it is not there."""
    if blob is None:
        found = cache.lookup(key, expect)
        if found is None:
            raise EntryRefusedError(f"entry {key[:12]} is not in the cache")
        return Admitted(found, installed=False)
    meta, files = entry_format.unpack(blob, key, secret)
    return admit(cache, key, files, meta, expect=expect, locked=locked, max_size=max_size)
