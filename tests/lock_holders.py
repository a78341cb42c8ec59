"""Who holds a file lock: for a test that finds a lock held to say by whom, from /proc (Linux)."""
from __future__ import annotations

import os
from pathlib import Path


def _process(pid: str) -> str:
    """'pid 123 (state S, parent 45): python -c ...' as far as /proc still knows it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"pid {pid} (gone)"
    return f"pid {pid} (state {state}, parent {ppid}): {command[:200] or '(no command line)'}"


def _locks_on(dev: int, ino: int) -> list[str]:
    """The /proc/locks lines for this file: 'FLOCK WRITE taken by pid ...'."""
    found = []
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return ["(/proc/locks cannot be read)"]
    for line in lines:
        fields = [f for f in line.split() if f != "->"]   # a blocked waiter is marked "->"
        if len(fields) < 6 or fields[5].count(":") != 2:
            continue
        major, minor, inode = fields[5].split(":")
        if (int(major, 16), int(minor, 16), int(inode)) == (os.major(dev), os.minor(dev), ino):
            waiting = " (waiting)" if "->" in line else ""
            found.append(f"{fields[1]} {fields[3]} lock{waiting} taken by {_process(fields[4])}")
    return found


def _openers(dev: int, ino: int) -> list[str]:
    """Every process with the file open, and as which descriptor."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (dev, ino):
                found.append(f"fd {fd} of {_process(pid)}")
    return found


def describe(path: str | os.PathLike) -> str:
    """Who holds a lock on `path` and who has it open, for an assertion message."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    locks = _locks_on(st.st_dev, st.st_ino) or ["no lock in /proc/locks"]
    openers = _openers(st.st_dev, st.st_ino) or ["no process has it open"]
    return "; ".join(locks) + ". Open in: " + "; ".join(openers)
