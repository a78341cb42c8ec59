"""A precompiled header of the directives a host C file starts with (TVM's `#define TVM_EXPORTS` and
its includes): made once per machine in zig's cache folder and given to every direct compile of a
file that starts with the same directives. Reading TVM's headers is some 5 ms of a small file's
40 ms; the file itself is compiled unchanged (its own includes are then skipped by their guards),
to the same object bytes.

Making the header costs more than a compile of one small file saves (a compile of the headers, some
50 ms, against 5 ms a file), so a process that does not find it compiles without it, and makes it
only on its MAKE_AFTER-th compile of those directives: a one-off build (the first on a machine, a
command-line build, a new cache folder) never waits for it, a tuning sweep makes it after a few
candidates, and every later compile on the machine uses it.

The header's name is a sha256 of the directives, of the whole compile command and of what stat says
of its include folders, so another zig, other flags, other include folders or the same folders
installed again make another header; the directives stay beside it (<name>.h,
written once). clang checks that the headers it was made from are unchanged; if a compile that
uses it fails, it is thrown away (and made again by the next compile) and the file is compiled
again through zig cc. Made in a temporary name and renamed: processes racing to make it each make
a whole one.

Both are read back as untrusted input (files/kept_file.py): the header is given to clang only if it
is a regular file of this user, in folders of this user no one else can write, that starts as
clang's precompiled headers do; the directives file is used only if it holds exactly the
directives, else it is written again (a FIFO or a link in its place is replaced, never read). A
header is made within the build's time limit (toolchain/deadline.py), never past it.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path

from ...files import kept_file
from . import zig_direct
from ..deadline import Deadline

FOLDER = "jitflow-pch"
#: how clang's precompiled headers start
_MAGIC = b"CPCH"
#: the longest a header may take to make where the build sets no limit (the headers take some 50 ms)
MAKE_LIMIT_S = 120.0
#: a precompiled header of TVM's includes is some megabytes; a larger file is not one
MAX_BYTES = 1 << 30
_DIRECTIVES = ("#define ", "#include ", "//")
_known: set[Path] = set()         # this process: headers known to exist (each zig cache has its own)
_making = threading.Lock()        # one thread makes a header; the others wait for it
_asked: dict[Path, int] = {}      # this process: header -> compiles that found it missing
#: a process makes a missing header on its this-many-th compile of the header's directives
MAKE_AFTER = 6


def leading_directives(text: str) -> str | None:
    """The lines a C file starts with that are `//` comments, #define or #include lines (None if
    they include nothing)."""
    end = 0
    for line in text.splitlines(keepends=True):
        if not line.startswith(_DIRECTIVES) or not line.endswith("\n"):
            break
        end += len(line)
    block = text[:end]
    return block if "#include " in block else None


def header_for(probe: zig_direct.Probe, directives: str, zig_cache: Path, env: dict[str, str],
               make_now: bool = False, deadline: Deadline | None = None) -> Path | None:
    """The precompiled header of `directives` for the compile command of `probe`, or None: when it
    cannot be made, or when it is not there and this process has not asked for it MAKE_AFTER times
    (`make_now`: a caller about to compile many files, a batch, has it made at once). Waiting for
    another thread's header, and making one, end at `deadline` (the build's): then None."""
    command = [word.replace(probe.folder, "<folder>") for word in probe.command]   # the same in every process
    words = [directives, *command, *_installed(command)]
    name = hashlib.sha256("\0".join(words).encode()).hexdigest()[:32] + ".pch"
    path = Path(zig_cache) / FOLDER / name
    if path in _known and _usable(path, zig_cache):
        return path
    if not _usable(path, zig_cache):
        if not _making.acquire(timeout=-1 if deadline is None else deadline.left()):
            return None
        try:
            _asked[path] = _asked.get(path, 0) + 1
            if _asked[path] < MAKE_AFTER and not make_now:
                return None
            if not _usable(path, zig_cache) and not _make(probe, directives, path, zig_cache, env, deadline):
                _asked[path] = 0          # asked again only after as many compiles
                return None
        finally:
            _making.release()
    _known.add(path)
    return path


def _installed(command: list[str]) -> list[str]:
    """What stat says of each include folder the command names (its inode and times): a package
    installed again at the same path (a new virtual environment) has new folders, so its headers get
    a header of their own, where one made from the old files would fail every compile clang checks
    it with."""
    out = []
    for word in command:
        if word.startswith("-I") and len(word) > 2:
            try:
                st = os.stat(word[2:])
            except OSError:
                continue
            out.append(f"{word[2:]} {st.st_dev} {st.st_ino} {st.st_mtime_ns}")
    return out


def _usable(path: Path, zig_cache: Path) -> bool:
    """Whether `path` is a precompiled header to give clang: a kept file as files/kept_file.py
    trusts one, that starts as clang's do. One that is there but is not is removed (made again)."""
    data = kept_file.read_bytes(path, MAX_BYTES, root=Path(zig_cache), head=len(_MAGIC))
    if data == _MAGIC:
        return True
    if (data is not None or os.path.lexists(path)) and kept_file.private_folder(path.parent):
        kept_file.discard(path)          # in our own folder only: never through a link to elsewhere
    return False


def _make(probe: zig_direct.Probe, directives: str, path: Path, zig_cache: Path, env: dict[str, str],
          deadline: Deadline | None) -> bool:
    """Make `path` from the directives, kept beside it as <name>.h (clang reads it again to check it),
    within `deadline` (else given up: the build compiles without it)."""
    folder = path.parent
    header = path.with_suffix(".h")
    partial = folder / f".{path.name}.{os.getpid()}"
    limit = MAKE_LIMIT_S if deadline is None else min(MAKE_LIMIT_S, deadline.left())
    if limit <= 0 or not kept_file.private_folder(folder):
        return False
    try:
        if kept_file.read_bytes(header, len(directives.encode()) + 1, root=Path(zig_cache)) != directives.encode():
            kept_file.discard(header)      # missing, damaged, or not ours: written again, whole
            _write_once(header, directives)
        command = probe.instantiate(str(folder), {zig_direct.SOURCE: ["-x", "c-header", header.name],
                                                  zig_direct.OBJECT: [partial.name]})
        if command is None:
            return False
        made = subprocess.run(command, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=limit)
        if made.returncode != 0 or not partial.is_file():
            return False
        os.replace(partial, path)
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        partial.unlink(missing_ok=True)


def _write_once(path: Path, text: str) -> None:
    """Create `path` whole with `text`, unless it exists: never replaced, so that its time (which
    clang checks) stays the one the header was made with."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def discard(path: Path) -> None:
    """Throw a header away (a compile that used it failed): the next compile makes it again."""
    _known.discard(path)
    try:
        path.unlink()
    except OSError:
        pass
