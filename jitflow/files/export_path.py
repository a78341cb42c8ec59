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
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from ..errors import InvalidInputError

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


def destination(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), what: str = "export_library",
                written: str = "the library", example: str = "kernel.so") -> Path:
    """The absolute destination for a file to be written at `path`, after the checks above; an
    InvalidInputError that says what is there and what to do otherwise. `what` names the writer in
    the message, `written` what it writes, `example` a file name to suggest."""
    dest = Path(path).expanduser().absolute()
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
        same = _same_file(found, inputs)
        if same is not None:     # named once where it is the input's own spelling
            alias = "" if Path(same).absolute() == dest else f" (the same file as {same})"
            raise InvalidInputError(f"{what}: {dest} is an input of this build{alias}; writing {written} "
                                    "there would destroy it. Give another output name")
    return dest


@contextmanager
def replaced(dest: Path, what: str, mode: int) -> Iterator[BinaryIO]:
    """A file opened for writing beside `dest`, renamed over it with `mode` once the block ends without
    an error: readers see the old file or the whole new one, and a failure leaves nothing behind. An
    OSError, in the block or after it, is an InvalidInputError that names `what` and the path."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot write in {dest.parent}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
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
