"""C that many libraries share, compiled once per machine: the object of a source kept in zig's cache
folder under the sha256 of its text and of how it is compiled (the zig version, the host, the CPU
level, the flags, the include folders and the files in them).

A CPU kernel library's entry functions (argument checks, the same for every kernel of one
signature: builder/host_c/outline.py, split.py) come from here; the library itself is linked from
the copy. The object is what clang makes of that text with those flags, byte for byte, so a
library is the same whether its entries were compiled now or before. Each object sits in a folder
of its own with the sha256 of its bytes (made in a temporary folder and renamed, checked on every
use, made again if it does not match: host_libs.made_once).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from . import host_libs, zig, zig_wheel
from ..deadline import Deadline

FOLDER = "jitflow-objects"
SOURCE, OBJECT = "shared.c", "shared.o"


@lru_cache(maxsize=8)
def _headers(include_dirs: tuple[str, ...]) -> str:
    """The include folders' files as they are now (name, size, time): another TVM installed where
    this one was gives other objects. Looked at once per process (some 75 files, a millisecond)."""
    found = []
    for top in include_dirs:
        for root, _dirs, files in os.walk(top):
            for name in files:
                try:
                    st = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                found.append(f"{os.path.join(root, name)} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(found)).encode()).hexdigest()


def recipe(text: str, include_dirs: Sequence[str], host: str, cpu: str | None) -> str:
    """The name of `text`'s object: a sha256 of everything its bytes depend on."""
    command = [zig_wheel.version(), *zig.flags(host, Path("<folder>"), cpu), *(f"-I{d}" for d in include_dirs),
               _headers(tuple(include_dirs))]
    return hashlib.sha256("\0".join([*command, text]).encode()).hexdigest()[:32]


def copy_object(text: str, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
                cpu: str | None = None, deadline: Deadline | None = None) -> Path:
    """`out`: a copy of the object of C `text` (compiled now if this machine has not compiled it
    before); CompileError if it does not compile, BuildTimeoutError if compiling it runs past
    `deadline` (the build's)."""
    folder = Path(zig_cache) / FOLDER / recipe(text, include_dirs, host, cpu)

    def build(work: Path, local: Path) -> None:
        (work / SOURCE).write_text(text)       # kept beside the object: what it was made from
        zig.compile_object(work / SOURCE, work / OBJECT, include_dirs, host, zig_cache, local, cpu,
                           deadline=deadline).wait(deadline)

    made = host_libs.made_once(folder, (OBJECT,), build, Path(zig_cache))
    shutil.copyfile(made / OBJECT, out)
    return out
