"""What a file kept between processes must never be taken for, put in its place: the cases every
reader of kept files (files/kept_file.py and its callers) is tested against."""
from __future__ import annotations

import os
from pathlib import Path

#: a user other than the one running the tests (nobody)
NOBODY = 65534
#: what plant() knows
KINDS = ("a link", "a FIFO", "another user's", "writable by others", "truncated", "garbage")


def plant(path: Path, how: str, tmp_path: Path) -> bool:
    """Put at `path` (a file jitflow wrote) what `how` says: a link to a copy elsewhere, a FIFO, a copy
    another user owns, a copy others can write, its first half, or garbage. False for a `how` not in
    KINDS (the caller's own case)."""
    if how not in KINDS:
        return False
    text = path.read_bytes()
    path.unlink()
    if how == "a link":
        elsewhere = tmp_path / f"elsewhere-{path.name}"
        elsewhere.write_bytes(text)
        path.symlink_to(elsewhere)
    elif how == "a FIFO":
        os.mkfifo(path)
    elif how == "another user's":
        path.write_bytes(text)
        os.chown(path, NOBODY, NOBODY)
    elif how == "writable by others":
        path.write_bytes(text)
        path.chmod(0o666)
    elif how == "truncated":
        path.write_bytes(text[:len(text) // 2])
    else:
        path.write_bytes(b"\x00\xff{[" * 100)
    return True
