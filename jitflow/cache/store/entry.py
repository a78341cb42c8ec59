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

import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

from ...formats import bounded_json

#: Bump when the layout of entries or of the built library changes.
FORMAT_VERSION = 1
LIBRARY = "lib.so"
META = "meta.json"
USED = "last_used"
SOURCES = "src"
HOST_C = "host.c"
MEMORY = "memory.json"     # formats/memory_facts.py reads it
#: the names (relative to the entry folder) of the files that make an entry, and so travel with it to
#: other caches; last_used stays behind (it is this cache's own record of use)
TRAVELLING = re.compile(rf"({re.escape(LIBRARY)}|{re.escape(META)}|{re.escape(MEMORY)}|{SOURCES}/[A-Za-z0-9_][A-Za-z0-9_.-]*)")
#: a meta.json is about 1.5 KB; larger or deeper than this it was not written by jitflow
META_MAX_BYTES = 1 << 20
META_MAX_DEPTH = 32
#: how an entry's files are opened for reading: never through a link, never waiting for a writer (a
#: FIFO put in a file's place would hang the reader), and then checked to be a regular file (open_file)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotAFileError(OSError):
    """An entry's file that is not a regular file (a FIFO, a device, a socket, a folder)."""


def open_file(path: str | os.PathLike, dir_fd: int | None = None) -> int:
    """A read-only descriptor of the entry file at `path` (READ_FLAGS), checked to be a regular file:
    OSError when it cannot be opened (ELOOP for a link), NotAFileError when it is not a regular file."""
    fd = os.open(path, READ_FLAGS, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotAFileError(errno.EINVAL, f"not a regular file (mode {stat.filemode(mode)})", os.fspath(path))
    return fd


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
        """The entry's metadata, or None when it is missing, unreadable or not of metadata's shape."""
        return self.meta_and_problem()[0]

    def meta_and_problem(self) -> tuple[dict[str, Any] | None, str | None]:
        """(metadata, None), or (None, why it cannot be used)."""
        try:
            with os.fdopen(open_file(self.meta_path), "rb") as f:
                return read_meta_file(f)
        except OSError as exc:
            return None, f"metadata unreadable ({exc.strerror or exc})"

    def travelling_files(self) -> list[str]:
        """The files of this folder that make the entry (TRAVELLING), library first; links and
        other kinds of file are left out."""
        names = [LIBRARY, META, MEMORY] + self.source_names()
        return [n for n in names if TRAVELLING.fullmatch(n) and (self.folder / n).is_file()
                and not (self.folder / n).is_symlink()]

    def read_source(self, path: Path) -> str | None:
        try:
            with os.fdopen(open_file(path), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return None

    def source_names(self) -> list[str]:
        """The kept sources, relative to the folder (src/host.c, ...)."""
        if not self.sources.is_dir():
            return []
        return sorted(f"{SOURCES}/{p.name}" for p in self.sources.iterdir() if p.is_file())


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: the latest time an entry may record (the end of year 9999): later, or before 1970, it was not written by jitflow
MAX_TIME = 253402300799.0


def _time(v: Any) -> bool:
    return _number(v) and 0 <= v <= MAX_TIME


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _target(v: Any) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("kind", ""), str) and isinstance(v.get("host", ""), str)
            and _strings(v.get("archs", [])))


def _key_inputs(v: Any) -> bool:
    options = v.get("options", {}) if isinstance(v, dict) else None
    return (isinstance(options, dict) and _strings(options.get("device_options", []))
            and isinstance(options.get("cuda_compiler", ""), str))


#: the fields of meta.json that jitflow reads, and what each must be; other fields are left alone
_SHAPE: dict[str, Callable[[Any], bool]] = {
    "key": lambda v: isinstance(v, str), "so_sha256": lambda v: isinstance(v, str),
    "format": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "so_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "created": _time, "fetched": _time, "functions": _strings, "sources": _strings,
    "cuda": lambda v: isinstance(v, bool), "key_inputs": _key_inputs, "origin": lambda v: isinstance(v, str),
    "versions": lambda v: isinstance(v, dict), "target": _target,
    "stages": lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
}
_REQUIRED = ("key", "format", "so_size", "so_sha256")


def meta_shape_problem(meta: Any) -> str | None:
    """Why `meta` is not an entry's metadata (a field missing or of the wrong type), or None."""
    if not isinstance(meta, dict):
        return "metadata is not a JSON object"
    missing = [name for name in _REQUIRED if name not in meta]
    if missing:
        return f"metadata has no {', '.join(missing)}"
    wrong = [name for name, fits in _SHAPE.items() if name in meta and not fits(meta[name])]
    if wrong:
        return f"metadata field {wrong[0]!r} is not of its type or range ({json.dumps(meta[wrong[0]])[:40]})"
    return None


def decode_meta(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(metadata, None) for the bytes of a meta.json of the right shape (its times within MAX_TIME, its
    text valid Unicode), else (None, why not).

    Bounded: more than META_MAX_BYTES, or nested deeper than META_MAX_DEPTH, is refused unparsed.
    """
    try:
        meta = bounded_json.loads(data, META_MAX_BYTES, META_MAX_DEPTH, "metadata")
    except bounded_json.BadJSON as exc:
        return None, str(exc)
    problem = meta_shape_problem(meta) or _text_problem(meta)
    return (None, problem) if problem else (meta, None)


def _text_problem(meta: dict[str, Any]) -> str | None:
    """Why some text in `meta` cannot be written out (a lone surrogate such as \\ud800, which JSON's
    escapes allow and no file name, terminal or UTF-8 text does), or None."""
    try:
        json.dumps(meta, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return "metadata holds text that is not valid Unicode (a lone surrogate such as \\ud800)"
    return None


def read_meta_file(f: IO[bytes]) -> tuple[dict[str, Any] | None, str | None]:
    """decode_meta of an open meta.json, reading no more than one byte past the limit."""
    return decode_meta(f.read(META_MAX_BYTES + 1))


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of the entry file at `path` (opened as open_file opens it)."""
    h = hashlib.sha256()
    with os.fdopen(open_file(path), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def meta_text(meta: dict[str, Any]) -> str:
    """meta.json's text: one field a line, sorted, each value as compact JSON (json's C encoder: an
    indented dump goes through its Python encoder, some 1.5 ms a publish)."""
    lines = [f" {json.dumps(str(name))}: {json.dumps(meta[name], sort_keys=True, default=str)}"
             for name in sorted(meta, key=str)]
    return "{\n" + ",\n".join(lines) + "\n}"


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


def label(name: str | None, functions: list[str]) -> str:
    """An entry's label as `jitflow cache ls` shows it: the name it was built under (compile(name=),
    FILE.py:NAME), else its functions (the first three, then how many more)."""
    if name:
        return name
    shown = ",".join(functions[:3]) + (f" +{len(functions) - 3}" if len(functions) > 3 else "")
    return shown
