"""Whether a given local user could serve the files of a read-only cache: reach and read them, and
trust them (`jitflow cache check --user NAME`).

A serving process of that user (JITFLOW_CACHE=readonly) opens the cache folder and each entry's
folders and files; it needs search rights on every folder on the way (the execute bit), and read
rights on the folders it opens and the files it reads, as the mode bits grant them to the user's
uid and groups (root needs neither). It also refuses what others could change: every folder from
`/` down to the cache is the user's or root's and writable by nobody else (folder_trust.py, as a
folder of installed code), and so is every folder and file of an entry (disk.py). Access control
lists are not read: where they grant more than the mode bits, this says no where the server would
be let in, never the other way.
"""
from __future__ import annotations

import grp
import os
import pwd
import stat
from typing import NamedTuple

from ..errors import InvalidInputError
from . import folder_trust


class User(NamedTuple):
    """A local user: name, uid and every group they are in (their primary group first)."""

    name: str
    uid: int
    gids: frozenset[int]

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid})"


def named(name: str) -> User:
    """The local user `name` (or a uid), with their groups; InvalidInputError when there is none."""
    try:
        account = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        raise InvalidInputError(f"no local user {name!r} on this machine (give a name or a uid from "
                                "/etc/passwd, the user that will serve the cache)") from None
    groups = {account.pw_gid} | {g.gr_gid for g in grp.getgrall() if account.pw_name in g.gr_mem}
    return User(account.pw_name, account.pw_uid, frozenset(groups))


def current() -> User:
    """The user running this process."""
    try:
        name = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        name = str(os.getuid())
    return User(name, os.getuid(), frozenset(os.getgroups()) | {os.getgid()})


def allowed(user: User, st: os.stat_result, want: int) -> bool:
    """Whether the mode bits grant `user` every right in `want` (os.R_OK | os.X_OK ...) on what `st` describes."""
    if user.uid == 0:
        return True
    mode = st.st_mode
    shift = 6 if st.st_uid == user.uid else 3 if st.st_gid in user.gids else 0
    return (mode >> shift) & want == want


def _rights(want: int) -> str:
    return "+".join(name for bit, name in ((os.R_OK, "read"), (os.X_OK, "enter")) if want & bit)


def reach_problem(user: User, path: str | os.PathLike) -> str | None:
    """Why `user` cannot reach `path` (search rights on every folder above it, links resolved), or None."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    for n in range(1, len(parts)):
        folder = os.sep.join(parts[:n]) or os.sep
        try:
            st = os.stat(folder)
        except OSError as exc:
            return f"{folder} cannot be checked: {exc.strerror or exc}"
        if not allowed(user, st, os.X_OK):
            return (f"{user.describe()} cannot enter {folder} ({_mode(st)}): make it enterable "
                    f"(chmod o+x {folder}, or serve as its owner or group)")
    return None


def _mode(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, group {st.st_gid}, mode {stat.S_IMODE(st.st_mode):o}"


def cache_problem(user: User, folder: str | os.PathLike, top: str | os.PathLike) -> str | None:
    """Why `user` cannot trust, reach and read the folder of a cache's entries, `folder` (<top>/v1), for
    read-only serving, or None."""
    problem = folder_trust.folder_problem(folder, uid=user.uid, installed=True)
    if problem is not None:
        return f"{user.describe()} would refuse the cache: {problem}"
    return reach_problem(user, folder) or item_problem(user, folder, True, top)


def item_problem(user: User, path: str | os.PathLike, folder: bool, top: str | os.PathLike) -> str | None:
    """Why `user` cannot read (a folder: read and enter) `path`, a folder or file of an entry, or refuses it
    as a read-only cache refuses one (another user's, writable by group or others, a link); None when
    fine. `top` is the cache folder, for the fix."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be checked: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link: a cache refuses links (unpack the bundle again)"
    if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
        return f"{path} is not a {'folder' if folder else 'regular file'}"
    if st.st_uid not in (user.uid, 0):
        return (f"{path} belongs to uid {st.st_uid}, and {user.describe()} trusts only their own files or root's: "
                f"unpack as root or as {user.name}")
    if st.st_mode & 0o022:
        return f"{path} is writable by group or others ({_mode(st)}): make it writable by its owner alone " \
               f"(chmod -R go-w {top})"
    want = os.R_OK | os.X_OK if folder else os.R_OK
    if not allowed(user, st, want):
        return f"{user.describe()} cannot {_rights(want)} {path} ({_mode(st)}): make the cache readable to " \
               f"them (unpack the bundle again with --readable, chmod -R go+rX {top}, or unpack as {user.name})"
    return None
