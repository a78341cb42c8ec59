"""The build recipe: a sha256 of jitflow's own code and data that shape a library's bytes.

Flags, preludes, the C fix-ups, the CUDA header shim, the packing of the blob and the key itself
live in jitflow's sources, and an edit to any of them must not be served libraries built before
it (as Triton hashes its own sources into its cache keys). The digest covers every file under the
folders below (so files added there later are covered too) and the listed cache modules, skipping
only compiled Python.

It is computed once per process, and once per install: the digest is memoized (toolchain/install_memo.py)
with a signature of what stat says of every recipe file (its size, its modification and change
times in nanoseconds, its inode). A process that finds the signature unchanged takes the memo's
digest without reading the files, as Python takes a module's bytecode when its source's stat is
unchanged; any edit, replacement, added or removed file reads them all again.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from ...toolchain import install_memo

PACKAGE = Path(__file__).resolve().parents[2]     # jitflow/
#: folders of jitflow whose every file shapes what is built
FOLDERS = ("builder", "toolchain", "formats", "targets")
#: single files that decide what an entry holds and what its key covers
FILES = ("cache/key/key.py", "cache/store/entry.py", "cache/key/recipe.py", "cache/key/registrations.py",
         "cache/key/held_values.py", "cache/key/code_identity.py", "cache/key/lowering_rules.py", "options.py",
         "inputs/pass_context.py")
#: the install memo's name for the digest
MEMO = "recipe"


def _files() -> list[tuple[str, str]]:
    """(name relative to the package, path) of every recipe file, sorted by name."""
    root = str(PACKAGE) + os.sep
    found = [(f, root + f) for f in FILES]
    pending = list(FOLDERS)
    while pending:
        folder = pending.pop()
        with os.scandir(root + folder) as listing:
            for item in listing:
                name = f"{folder}/{item.name}"
                if item.is_dir(follow_symlinks=False):
                    if item.name != "__pycache__":
                        pending.append(name)
                elif not item.name.endswith((".pyc", ".pyo")):
                    found.append((name, item.path))
    return sorted(found)


def signature(files: list[tuple[str, str]]) -> str:
    """sha256 over each file's name and stat (size, mtime and ctime in ns, inode, device): what
    changes when a file is edited, replaced, added or removed."""
    h = hashlib.sha256()
    for name, path in files:
        st = os.stat(path)
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}\n".encode())
    return h.hexdigest()


def _read_all(files: list[tuple[str, str]]) -> str:
    """sha256 (hex) over the relative name and the bytes of every file."""
    h = hashlib.sha256()
    for name, path in files:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, os.fstat(fd).st_size + 1)
        finally:
            os.close(fd)
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _is_digest(value: object) -> bool:
    """Whether a memo's value is what _read_all gives: a sha256 in hex."""
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


@lru_cache(maxsize=1)
def digest() -> str:
    """sha256 (hex) over the relative name and the bytes of every recipe file: the memo's, when the
    files' signature is the one it was taken with (stat first, so an edit meanwhile reads again)."""
    files = _files()
    found = signature(files)
    memo = install_memo.read(MEMO)
    if isinstance(memo, dict) and memo.get("signature") == found and _is_digest(memo.get("digest")):
        return memo["digest"]
    value = _read_all(files)
    install_memo.write(MEMO, {"signature": found, "digest": value})
    return value
