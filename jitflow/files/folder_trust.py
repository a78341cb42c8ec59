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
                   installed: bool = False) -> str | None:
    """Why `path` is not a trusted folder (see the module's docstring), or None when it is.

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
        return f"{path} does not exist"
    except OSError as exc:
        return f"{path} cannot be checked: {exc}"
    for index, (where, st) in enumerate(chain):
        last = index == len(chain) - 1 and not parent
        if not _owner_ok(st, uid):
            return f"{where} belongs to another user ({_describe(st)})"
        if stat.S_ISLNK(st.st_mode):
            continue
        if not stat.S_ISDIR(st.st_mode):
            return f"{where} is not a folder"
        if last:
            if st.st_uid != uid and not installed:
                return f"{where} is not owned by this user (uid {uid}; {_describe(st)})"
            if writable_by_others(st, uid):
                return f"{where} is writable by group or others ({_describe(st)})"
        elif st.st_mode & 0o022 and not (st.st_mode & stat.S_ISVTX and st.st_uid == 0):
            if st.st_mode & 0o002 or not _private_group(st.st_gid, uid):
                return f"{where} is writable by group or others ({_describe(st)})"
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
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass  # another process of ours, or someone else: the checks below tell which
        _narrow(folder, fix)
        check_folder(folder, fix)
    if not missing:
        _narrow(path, fix)
        check_folder(path, fix)
    return path


#: what a refused folder that others could write is advised: narrowing it would not undo what they did
OPENED_REMEDY = ("remove that folder (jitflow makes it again, private to you); narrowing it is not enough, "
                 "since what it holds may already be another user's")


def _narrow(folder: Path, fix: str | None = None) -> None:
    """Make a folder this user owns readable by the user alone (a umask of 022 leaves it readable by
    all). One that others could write is refused instead (UntrustedFolderError): anything in it may
    have been put there, or swapped, while it was open, and narrowing it now would make jitflow trust
    that. Folders of others and links are left as they are, for the check to refuse."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
        if writable_by_others(st, st.st_uid):
            raise UntrustedFolderError(folder, f"{folder} is writable by group or others ({_describe(st)}), so "
                                       "what it holds may be another user's", fix, OPENED_REMEDY)
        os.chmod(folder, 0o700)
