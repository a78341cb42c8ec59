"""Running Python as another local user (nobody) with this checkout's environment, wherever the
checkout was cloned: the serving user of the deployment tests.

The other user must be able to run the checkout's interpreter and import numpy, TVM and jitflow
from it. Where the checkout sits in a folder they cannot enter (a clone under /root, or in a
`mktemp -d` folder of mode 0700), the checkout is bind-mounted, as root, under a fresh temporary
folder anyone may enter, and run from there; the mount is undone at the end of the session. Where
neither works (not root, no setpriv, mounts not allowed) the tests that need it are skipped with
the reason.
"""
from __future__ import annotations

import atexit
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER = "nobody"
#: what the other user's interpreter must import for the tests to run as them
PROBE = "import numpy, tvm, jitflow; print(jitflow.__file__)"


@dataclass(frozen=True)
class OtherUser:
    """How to run Python as the other user: `python` and the checkout `root` as that user sees them."""

    name: str
    uid: int
    gid: int
    python: str
    root: Path

    def command(self, *args: str) -> list[str]:
        """argv running this checkout's Python with `args` as the other user."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", self.python, *args]

    def env(self, **extra: str) -> dict[str, str]:
        """The calling environment with the checkout (and its tests) importable as this user sees it."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root / "tests"), str(self.root)])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra)
        return env

    def run(self, args: list[str], env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """Run this checkout's Python with `args` as the other user (in `cwd`, default a folder anyone may
        enter), capturing its output."""
        return subprocess.run(self.command(*args), env=env or self.env(), capture_output=True, text=True,
                              timeout=timeout, cwd=cwd or tempfile.gettempdir())


_found: dict[str, OtherUser | str] = {}


def _probe(user: OtherUser) -> str | None:
    """Why `user` cannot import jitflow from the checkout it is given, or None."""
    try:
        proc = user.run(["-c", PROBE], timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0 or not proc.stdout.strip().startswith(str(user.root)):
        return (proc.stderr.strip().splitlines() or [proc.stdout.strip() or "no output"])[-1]
    return None


def _mounted() -> Path | None:
    """The checkout bind-mounted (read-only where allowed) under a new folder anyone may enter, or None."""
    top = Path(tempfile.mkdtemp(prefix="jitflow-checkout-"))
    top.chmod(0o755)
    where = top / "checkout"
    where.mkdir()
    if subprocess.run(["mount", "--bind", str(ROOT), str(where)], capture_output=True).returncode != 0:
        shutil.rmtree(top, ignore_errors=True)
        return None
    subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], capture_output=True)

    def undo() -> None:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)

    atexit.register(undo)
    return where


def other_user() -> OtherUser:
    """The other user, able to import this checkout's jitflow (once per process); pytest.skip saying
    why where that cannot be arranged."""
    if USER not in _found:
        _found[USER] = _arrange()
    found = _found[USER]
    if isinstance(found, str):
        pytest.skip(found)
    return found


def _arrange() -> OtherUser | str:
    if os.getuid() != 0:
        return "acting as another local user needs root"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    try:
        account = pwd.getpwnam(USER)
        gid = grp.getgrgid(account.pw_gid).gr_gid
    except KeyError:
        return f"no user {USER!r} on this machine"
    user = OtherUser(USER, account.pw_uid, gid, sys.executable, ROOT)
    first = _probe(user)
    if first is None:
        return user
    if not Path(sys.executable).absolute().is_relative_to(ROOT):
        return f"{USER} cannot import jitflow from this checkout ({first}), and its Python is outside the checkout"
    where = _mounted()
    if where is None:
        return f"{USER} cannot import jitflow from this checkout ({first}), and it cannot be bind-mounted elsewhere"
    moved = OtherUser(USER, account.pw_uid, gid, str(where / Path(sys.executable).absolute().relative_to(ROOT)),
                      where)
    second = _probe(moved)
    if second is not None:
        return f"{USER} cannot import jitflow from this checkout ({first}), nor from a bind mount of it ({second})"
    return moved
