"""The cache entry: the one description of an entry folder, and how an entry is checked.

    <cache dir>/v<FORMAT_VERSION>/entries/<key[:2]>/<key>/
        lib.so        the library
        meta.json     the key's inputs, the library's sha256 and size, versions, stage times
        last_used     its modification time is the entry's last use
        src/          host.c, kernels.cu (kernels1.cu ...), the device compiler's log beside each
        memory.json   the build's memory record (formats/memory_facts.py names and reads it; the
                      library holds the same bytes, so an entry without it loses nothing)

The disk cache writes and reads entries, inspect reports on them and the shared tier packs and
unpacks them: all three go through this module, nobody else spells these names.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bump when the layout of entries or of the built library changes.
FORMAT_VERSION = 1
LIBRARY = "lib.so"
META = "meta.json"
USED = "last_used"
SOURCES = "src"
HOST_C = "host.c"


def kernels_name(index: int, suffix: str = ".cu") -> str:
    """File name of the CUDA source (or, with suffix '.log', the compiler log) of device module `index`."""
    return f"kernels{index or ''}{suffix}"


@dataclass(frozen=True)
class Entry:
    """An entry folder (a published cache entry, or a build folder laid out the same way)."""

    folder: Path

    @property
    def key(self) -> str:
        return self.folder.name

    @property
    def library(self) -> Path:
        return self.folder / LIBRARY

    @property
    def meta_path(self) -> Path:
        return self.folder / META

    @property
    def used(self) -> Path:
        return self.folder / USED

    @property
    def sources(self) -> Path:
        return self.folder / SOURCES

    @property
    def host_c(self) -> Path:
        return self.sources / HOST_C

    def kernels_source(self, index: int) -> Path:
        return self.sources / kernels_name(index)

    def kernels_log(self, index: int) -> Path:
        return self.sources / kernels_name(index, ".log")

    def read_meta(self) -> dict[str, Any] | None:
        """The entry's metadata, or None when it is missing or unreadable."""
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def read_source(self, path: Path) -> str | None:
        try:
            return path.read_text()
        except OSError:
            return None

    def source_names(self) -> list[str]:
        """The kept sources, relative to the folder (src/host.c, ...)."""
        if not self.sources.is_dir():
            return []
        return sorted(f"{SOURCES}/{p.name}" for p in self.sources.iterdir() if p.is_file())


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def as_json(value: Any) -> Any:
    """`value` as it reads back from meta.json (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def library_problem(meta: dict[str, Any], size: int, sha256: str) -> str | None:
    """Why a library of this size and sha256 is not the one the metadata records, or None."""
    if size != meta.get("so_size"):
        return f"library size {size} != {meta.get('so_size')}"
    if sha256 != meta.get("so_sha256"):
        return "library sha256 mismatch"
    return None


def meta_problem(meta: dict[str, Any], key: str, expect: dict[str, Any] | None = None) -> str | None:
    """Why this metadata does not belong to `key` (and, if given, the key's inputs `expect`), or None."""
    if meta.get("key") != key or meta.get("format") != FORMAT_VERSION:
        return "metadata is for another key or format"
    if expect is not None and meta.get("key_inputs") != as_json(expect):
        return "metadata records other tool versions, target or options"
    return None


def discard(path: Path, trash_root: Path) -> None:
    """Take `path` out of place in one rename (readers never see half of it), then delete it."""
    trash = Path(tempfile.mkdtemp(prefix="old.", dir=trash_root))
    try:
        os.rename(path, trash / "entry")
    finally:
        shutil.rmtree(trash, ignore_errors=True)


def target_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What an entry's library is built for: kind, archs, host and, for CUDA, compiler and options."""
    target = meta.get("target")
    if not isinstance(target, dict):
        return None
    options = (meta.get("key_inputs") or {}).get("options") or {}
    out = {"kind": target.get("kind"), "archs": list(target.get("archs") or []), "host": target.get("host")}
    if target.get("kind") == "cuda":
        out["cuda_compiler"] = options.get("cuda_compiler", "nvrtc")
        out["device_options"] = list(options.get("device_options") or [])
    return out


def target_text(target: dict[str, Any] | None, host: bool = True) -> str:
    """A target as target_of gives it, in words: 'cuda sm_80,sm_90 (nvrtc) for x86_64-linux-gnu'."""
    if not target:
        return "?"
    text = str(target.get("kind") or "?")
    if target.get("archs"):
        text += " " + ",".join(target["archs"])
    if target.get("cuda_compiler"):
        text += f" ({target['cuda_compiler']})"
    if host and target.get("host"):
        text += f" for {target['host']}"
    return text
