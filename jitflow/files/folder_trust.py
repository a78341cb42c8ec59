"""Whether a folder can be trusted to hold code this process will load, and how to make one that can.

A folder is trusted when nobody but this user (and root) can change what it holds, now or later:

- every folder consulted to reach it, from `/` down, including those a symbolic link on the way
  points into, is owned by this user or by root, and is not writable by its group or by others
  (a group is allowed when it is the user's private group: same name as the user, no other
  members, the convention under which a umask of 002 is usual);
  the one exception is a folder owned by root with the sticky bit (such as /tmp): there others may
  create their own names but cannot rename or remove ours, so the next component must then be
  owned by this user or by root, which is checked like every other;
- every symbolic link on the way is owned by this user or by root;
- the folder it resolves to is owned by this user and writable by this user alone.

Under those conditions nothing another local user does can swap a file or a folder below it, so
checks made through a path stay true until this user changes something. These functions are the
one place that decides it: the disk cache and its fallback folder use them, and so can any other
folder jitflow keeps code in (zig's cache, for one).

A folder of this user that others could write is refused, never narrowed and then trusted: what it
holds may have been put there, or swapped, while it was open. The files read back from trusted
folders are checked one by one as well (kept_file.py).

Why a folder is not trusted comes with its kind (Problem: missing, unreadable, untrusted), so that a
caller can give the fix that fits. Folders of this user may be made readable by every user, never
writable (make_readable): a cache root unpacks for another user to serve.
"""
from __future__ import annotations

import errno
import os
import stat
from collections import deque
from functools import lru_cache
from pathlib import Path

from ..errors import UntrustedFolderError

_MAX_LINKS = 40
#: the kinds of Problem: the folder is not there, this user may not look into a folder on the way,
#: a folder or link on the way is another user's or writable by others, or something else (a file
#: where a folder should be)
MISSING, UNREADABLE, UNTRUSTED, OTHER = "missing", "unreadable", "untrusted", "other"


class Problem(str):
    """Why a folder is not trusted, in words (it is the str), with its `kind` (MISSING, UNREADABLE,
    UNTRUSTED, OTHER) and the path it is about (`where`): what a caller needs to choose the fix."""

    kind: str
    where: str

    def __new__(cls, text: str, kind: str, where: str) -> Problem:
        made = super().__new__(cls, text)
        made.kind, made.where = kind, where
        return made


def _absolute(path: str | os.PathLike) -> str:
    """`path` made absolute without touching its components ('..' stays for the walk to resolve)."""
    path = os.fspath(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


@lru_cache(maxsize=None)
def _private_group(gid: int, uid: int) -> bool:
    """Whether `gid` is the user's private group (same name as the user, no other members): the
    convention under which a umask of 002 leaves folders group-writable without sharing them."""
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _owner_ok(st: os.stat_result, uid: int) -> bool:
    return st.st_uid in (uid, 0)


def _describe(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}"


def _chain(path: str) -> list[tuple[str, os.stat_result]]:
    """(path, lstat) of every folder and link consulted to resolve `path`, outermost first.

    Raises FileNotFoundError at the first missing component and OSError on others.
    """
    parts = deque(Path(path).parts[1:])
    current = "/"
    consulted = [("/", os.lstat("/"))]
    links = 0
    while parts:
        name = parts.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current) or "/"
            continue
        child = os.path.join(current, name)
        st = os.lstat(child)
        consulted.append((child, st))
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise OSError(f"too many symbolic links resolving {path}")
            target = Path(os.readlink(child))
            if target.is_absolute():
                current = "/"
                parts.extendleft(reversed(target.parts[1:]))
            else:
                parts.extendleft(reversed(target.parts))
        else:
            current = child
    return consulted


def folder_problem(path: str | os.PathLike, uid: int | None = None, parent: bool = False,
                   installed: bool = False) -> Problem | None:
    """Why `path` is not a trusted folder (see the module's docstring), or None when it is: a
    Problem, the reason in words with its kind.

    A missing folder is a problem too ("... does not exist"). With `parent`, `path` is judged as a
    folder to create one in: like the folders above it (root's, or a sticky folder such as /tmp).
    With `installed`, as a folder of installed code to load (TVM's libraries, TVM_LIBRARY_PATH): it
    may be root's as well as this user's (a system install), and is never writable by others,
    sticky or not (anyone could put a library of that name in /tmp).
    """
    uid = os.getuid() if uid is None else uid
    path = _absolute(path)
    try:
        chain = _chain(path)
    except FileNotFoundError:
        return Problem(f"{path} does not exist", MISSING, path)
    except PermissionError as exc:     # a folder on the way this user may not look into: the file's parent
        blocked = os.path.dirname(exc.filename) if isinstance(exc.filename, str) else path
        return Problem(f"{path} cannot be checked: {exc}", UNREADABLE, blocked)
    except OSError as exc:
        return Problem(f"{path} cannot be checked: {exc}", OTHER, path)
    for index, (where, st) in enumerate(chain):
        last = index == len(chain) - 1 and not parent
        if not _owner_ok(st, uid):
            return Problem(f"{where} belongs to another user ({_describe(st)})", UNTRUSTED, where)
        if stat.S_ISLNK(st.st_mode):
            continue
        if not stat.S_ISDIR(st.st_mode):
            return Problem(f"{where} is not a folder", OTHER, where)
        if last:
            if st.st_uid != uid and not installed:
                return Problem(f"{where} is not owned by this user (uid {uid}; {_describe(st)})", UNTRUSTED, where)
            if writable_by_others(st, uid):
                return Problem(f"{where} is writable by group or others ({_describe(st)})", UNTRUSTED, where)
        elif st.st_mode & 0o022 and not (st.st_mode & stat.S_ISVTX and st.st_uid == 0):
            if st.st_mode & 0o002 or not _private_group(st.st_gid, uid):
                return Problem(f"{where} is writable by group or others ({_describe(st)})", UNTRUSTED, where)
    return None


def writable_by_others(st: os.stat_result, uid: int) -> bool:
    """Whether others than `uid` may write what `st` describes (its private group aside)."""
    return bool(st.st_mode & 0o002 or (st.st_mode & 0o020 and not _private_group(st.st_gid, uid)))


def file_problem(path: str | os.PathLike, uid: int | None = None) -> str | None:
    """Why the file at `path` is not one this process may load code from (a library), or None: it
    is a regular file of this user or root that no one else can write, every folder on the way to
    it (and every link) is trusted as folder_problem trusts the folders above a cache, and the
    folder it lies in is one of installed code (folder_problem(installed=True))."""
    uid = os.getuid() if uid is None else uid
    path = _absolute(path)
    try:
        resolved = os.path.realpath(path)
        st = os.stat(path)
    except OSError as exc:
        return f"{path} cannot be checked: {exc.strerror or exc}"
    folder = folder_problem(os.path.dirname(path), uid, installed=True) or \
        folder_problem(os.path.dirname(resolved), uid, installed=True)
    if folder:
        return folder
    try:
        link = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be checked: {exc.strerror or exc}"
    if stat.S_ISLNK(link.st_mode) and not _owner_ok(link, uid):
        return f"{path} is a link of another user ({_describe(link)})"
    if not stat.S_ISREG(st.st_mode):
        return f"{resolved} is not a regular file"
    if not _owner_ok(st, uid):
        return f"{resolved} belongs to another user ({_describe(st)})"
    if writable_by_others(st, uid):
        return f"{resolved} is writable by group or others ({_describe(st)})"
    return None


def check_folder(path: str | os.PathLike, fix: str | None = None, parent: bool = False) -> None:
    """Raise UntrustedFolderError naming the folder and the fix unless `path` is trusted.

    `fix` ends the message's advice (for example the setting that chooses another folder);
    `parent` as for folder_problem."""
    problem = folder_problem(path, parent=parent)
    if problem is not None:
        raise UntrustedFolderError(path, problem, fix)


def make_private_folder(path: str | os.PathLike, fix: str | None = None) -> Path:
    """Create `path` (and missing parents) readable and writable by this user alone, and check it.

    Existing folders above it must already be trusted; a folder it creates gets mode 0700 at
    creation (never a moment with wider rights). An existing folder of ours that others can read is
    narrowed to 0700 first; one that others could write is refused, never narrowed and then trusted
    (what it holds may be theirs). Raises OSError when a folder cannot be created (read-only, no rights)
    and UntrustedFolderError when one exists but could be changed by someone else, such as a
    folder another user created first at a predictable name.
    """
    return make_folder(path, fix, narrow=True)


def make_folder(path: str | os.PathLike, fix: str | None = None, *, readable: bool = False,
                parents: int | None = None, narrow: bool = False) -> Path:
    """Create `path` and its missing parents, and check it (make_private_folder is this with `narrow`).

    `path` is created 0700, or 0755 with `readable` (whatever the umask). The missing folders above
    it get 0700, or `parents` with the umask applied, as `mkdir -p` makes them (0755 under the usual
    umask). Folders that exist keep their mode (with `narrow`, one of ours that others can read is
    made 0700); one of ours that others could write is refused, never narrowed and then trusted.
    Raises as make_private_folder does.
    """
    path = Path(_absolute(path))
    missing = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    if missing:
        if not os.path.isdir(missing[-1].parent):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(missing[-1].parent))
        check_folder(missing[-1].parent, fix, parent=True)
    for folder in reversed(missing):
        above = folder != path and parents is not None
        try:
            os.mkdir(folder, parents if above else 0o700)    # type: ignore[arg-type]
        except FileExistsError:
            pass  # another process of ours, or someone else: the checks below tell which
        else:
            if readable and not above:
                os.chmod(folder, 0o755)
        _narrow(folder, fix, narrow)
        check_folder(folder, fix)
    if not missing:
        _narrow(path, fix, narrow)
        check_folder(path, fix)
    return path


def make_readable(path: str | os.PathLike, deep: bool = True) -> None:
    """Let every user read `path` and, with `deep`, what it holds (folders r-x, files r--, added to
    their modes), never write it: what `jitflow cache unpack --readable` installs, for a service
    running as another user. Only what this user owns is changed; links are neither followed nor changed."""
    uid = os.getuid()

    def widen(item: str) -> None:
        st = os.lstat(item)
        if st.st_uid != uid or stat.S_ISLNK(st.st_mode):
            return
        more = 0o055 if stat.S_ISDIR(st.st_mode) else 0o044 if stat.S_ISREG(st.st_mode) else 0
        if more and stat.S_IMODE(st.st_mode) & more != more:
            os.chmod(item, stat.S_IMODE(st.st_mode) | more)

    widen(os.fspath(path))
    if not deep or not os.path.isdir(path) or os.path.islink(path):
        return
    for root, dirs, files in os.walk(path):     # never into links to folders
        for name in dirs + files:
            widen(os.path.join(root, name))


#: what a refused folder that others could write is advised: narrowing it would not undo what they did
OPENED_REMEDY = ("remove that folder (jitflow makes it again, private to you); narrowing it is not enough, "
                 "since what it holds may already be another user's")


def _narrow(folder: Path, fix: str | None = None, narrow: bool = True) -> None:
    """Make a folder this user owns readable by the user alone (a umask of 022 leaves it readable by
    all), with `narrow`. One that others could write is refused instead (UntrustedFolderError): anything
    in it may have been put there, or swapped, while it was open, and narrowing it now would make
    jitflow trust that. Folders of others and links are left as they are, for the check to refuse."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
        if writable_by_others(st, st.st_uid):
            raise UntrustedFolderError(folder, f"{folder} is writable by group or others ({_describe(st)}), so "
                                       "what it holds may be another user's", fix, OPENED_REMEDY)
        if narrow:
            os.chmod(folder, 0o700)
