"""Where an exported library, or any other file jitflow writes on request (`inspect --html`,
`--timeline`, `rep.html(path)`), may be written.

export_library writes a temporary file beside the destination and renames it over the
destination (write_atomically does the same for a page or a timeline): whatever was at that name
is replaced, not written into, and a failure leaves nothing. That is right for a regular file (an
older library) and wrong for anything else. So the destination must be:

- a new name, or an existing regular file, in a folder that exists;
- not a directory, a character or block device (a copy of /dev/null, or /dev/null itself as
  root), a FIFO or a socket: those are refused, since the rename would turn them into a file;
- a symbolic link to a regular file (or to nothing) is replaced itself, as `cc -o` replaces one:
  its target is left alone. A link to anything else, or to one of the build's inputs, is refused
  like what it points to;
- not one of the build's inputs (`jitflow build model.py:f -o model.py`), compared by device
  and inode, so another spelling of the path or a hard link is seen too.

A name of one of this process's open files (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
`/proc/self/fd/N`, or a link to one) is written through, in order, as `cat > /dev/stdout` writes:
there is nothing to replace (the rename would turn the `/dev/stdout` link into a regular file and
write nothing to standard output), and such a stream is not atomic. A terminal is refused, as tar
refuses one. Any other link in /dev or /proc, or one that leads to another process's descriptor, is
refused: replacing it would change the system.
"""
from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from ..errors import InvalidInputError

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


#: the names of a process's own open files: /dev/stdout, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N
_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD = re.compile(r"/(?:dev/fd|proc/(?:self|thread-self|(?P<pid>\d+))(?:/task/\d+)?/fd)/(?P<fd>\d+)")
_MAX_HOPS = 40


def _hops(path: Path) -> list[str]:
    """`path` and each path its chain of links leads to, as written (not resolved: the links of
    /proc/self/fd name what the descriptor holds, not a path to open)."""
    hops, here = [os.path.normpath(path)], str(path)
    for _ in range(_MAX_HOPS):
        try:
            target = os.readlink(here)
        except OSError:
            break
        if not target.startswith("/") and (":[" in target or target.startswith("anon_inode:")):
            break    # pipe:[123], socket:[45]: what a descriptor holds, no path
        here = os.path.normpath(os.path.join(os.path.dirname(here), target))
        hops.append(here)
    return hops


def stream_of(path: str | os.PathLike) -> int | None:
    """The descriptor of this process that `path` names (/dev/stdout: 1), through links; None when it
    names none."""
    return _descriptor(_hops(Path(path).expanduser().absolute()))


def _descriptor(hops: list[str]) -> int | None:
    """The descriptor of this process that one of a link chain's `hops` names, else None."""
    for hop in hops:
        if hop in _STREAMS:
            return _STREAMS[hop]
        found = _FD.fullmatch(hop)
        if found and (found["pid"] is None or int(found["pid"]) == os.getpid()):
            return int(found["fd"])
    return None


def _stream(dest: Path, fd: int, inputs: Iterable[str | os.PathLike], what: str, written: str) -> None:
    """Refuse a stream destination that is not open for writing, is a terminal, or is an input."""
    import fcntl

    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        found = os.fstat(fd)
    except OSError:
        raise InvalidInputError(f"{what}: {dest} names descriptor {fd}, which this process has not open; "
                                "give a file name") from None
    if flags not in (os.O_WRONLY, os.O_RDWR):
        raise InvalidInputError(f"{what}: {dest} names descriptor {fd}, which is not open for writing; "
                                "give a file name")
    if os.isatty(fd):
        raise InvalidInputError(f"{what}: {dest} is a terminal, and {written} is binary; redirect it "
                                "(> file) or give a file name")
    _refuse_an_input(dest, found, inputs, what, written)


def _refuse_an_input(dest: Path, found: os.stat_result, inputs: Iterable[str | os.PathLike], what: str,
                     written: str) -> None:
    """An InvalidInputError when the file `found` describes is one of the build's `inputs`."""
    same = _same_file(found, inputs)
    if same is not None:     # named once where it is the input's own spelling
        alias = "" if Path(same).absolute() == dest else f" (the same file as {same})"
        raise InvalidInputError(f"{what}: {dest} is an input of this build{alias}; writing {written} "
                                "there would destroy it. Give another output name")


def destination(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), what: str = "export_library",
                written: str = "the library", example: str = "kernel.so") -> Path:
    """The absolute destination for a file to be written at `path`, after the checks above; an
    InvalidInputError that says what is there and what to do otherwise. `what` names the writer in
    the message, `written` what it writes, `example` a file name to suggest."""
    dest = Path(path).expanduser().absolute()
    hops = _hops(dest)
    fd = _descriptor(hops)
    if fd is not None:
        _stream(dest, fd, inputs, what, written)
        return dest
    if os.path.islink(dest) and (str(dest).startswith(("/dev/", "/proc/")) or any(_FD.fullmatch(h) for h in hops[1:])):
        raise InvalidInputError(f"{what}: {dest} is a link in /dev or /proc, or to another process's open file: "
                                f"replacing it with {written} would change the system, and writing through it "
                                "is not this process's to do. Give the name of a file to write")
    try:
        found = os.stat(dest)
    except FileNotFoundError:
        found = None   # a new name, or a dangling link (replaced)
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot look at {dest}: {exc.strerror}") from None
    if found is not None and not stat.S_ISREG(found.st_mode):
        kind = _KINDS.get(stat.S_IFMT(found.st_mode), "not a regular file")
        fix = f"a file name such as {example} in it" if stat.S_ISDIR(found.st_mode) else "the name of a file to write"
        raise InvalidInputError(f"{what}: {dest} is {kind}; {written} would replace it, not be "
                                f"written into it. Give {fix}")
    if not dest.parent.is_dir():
        raise InvalidInputError(f"{what}: the folder {dest.parent} does not exist")
    if found is not None:
        _refuse_an_input(dest, found, inputs, what, written)
    return dest


class _Written:
    """A writer that counts what passes through it: tell() is the bytes written, where the
    descriptor behind it (a pipe) cannot seek."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.count = out, 0

    def write(self, data: bytes) -> int:
        self.out.write(data)
        self.count += len(data)
        return len(data)

    def tell(self) -> int:
        return self.count

    def flush(self) -> None:
        self.out.flush()


@contextmanager
def replaced(dest: Path, what: str, mode: int, sync: bool = False) -> Iterator[BinaryIO]:
    """A file opened for writing beside `dest`, renamed over it with `mode` once the block ends without
    an error: readers see the old file or the whole new one, and a failure leaves nothing behind. A
    stream destination (stream_of) is written through instead. `sync`: on disk before the rename. An
    OSError, in the block or after it, is an InvalidInputError that names `what` and the path. The
    writer's tell() is the bytes written so far."""
    fd = stream_of(dest)
    if fd is not None:
        try:
            with os.fdopen(os.dup(fd), "wb") as out:
                yield _Written(out)  # type: ignore[misc]
        except OSError as exc:
            raise InvalidInputError(f"{what}: cannot write {dest}: {exc.strerror or exc}") from None
        return
    try:
        tmp_fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot write in {dest.parent}: {exc.strerror}") from None
    try:
        with os.fdopen(tmp_fd, "wb") as out:
            yield _Written(out)  # type: ignore[misc]
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot write {dest}: {exc.strerror}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_atomically(dest: Path, data: str | bytes, what: str) -> None:
    """Write `data` to `dest` (a destination() result) through a temporary file beside it, renamed
    over it (replaced()). A file that was there keeps its permissions; a new one is readable by all,
    as `open(path, "w")` makes it under the usual umask."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(os.stat(dest).st_mode)
    except OSError:
        mode = 0o644
    with replaced(dest, what, mode) as out:
        out.write(raw)


def _same_file(found: os.stat_result, inputs: Iterable[str | os.PathLike]) -> str | None:
    """The input that is the file `found` describes (same device and inode), or None."""
    for item in inputs:
        try:
            other = os.stat(item)
        except (OSError, ValueError):
            continue
        if (other.st_dev, other.st_ino) == (found.st_dev, found.st_ino):
            return str(item)
    return None


def loaded_sources() -> list[str]:
    """The files of every Python module loaded in this process: the inputs of a build that a
    command-line module file (and whatever it imports) made."""
    files = []
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str):
            files.append(name)
    return files


#: file-name endings that promise another format than the shared library export_library writes
#: (TVM writes a tar of objects for .tar, an archive for .a); checked longest first
_OTHER_FORMATS = {".tar.gz": "a gzipped tar archive", ".tar.bz2": "a bzip2 tar archive",
                  ".tar.xz": "an xz tar archive", ".tgz": "a gzipped tar archive", ".tar": "a tar archive",
                  ".zip": "a zip archive", ".a": "a static archive", ".lib": "a static library",
                  ".o": "an object file", ".obj": "an object file", ".dll": "a Windows DLL",
                  ".dylib": "a macOS library", ".wasm": "a WebAssembly module"}


def check_library_name(dest: Path, what: str = "export_library") -> None:
    """Refuse a library name whose suffix promises another format (x.tar, x.o, x.a): the file
    written is always an ELF shared library, whatever it is called."""
    name = dest.name.lower()
    for suffix, kind in _OTHER_FORMATS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            raise InvalidInputError(f"{what}: {dest.name} ends in {suffix}, which names {kind}, but jitflow "
                                    f"writes a shared library (ELF .so) only; name it with .so, e.g. "
                                    f"{dest.name[:-len(suffix)]}.so")
