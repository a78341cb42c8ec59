"""Where zig's cache lives: one private folder per user and zig version, shared by every jitflow
cache folder on the machine, so that a new JITFLOW_CACHE_DIR pays no toolchain set-up again.

The default is `<user cache folder>/jitflow/toolchain/zig-<version>` (platformdirs), or the folder
JITFLOW_ZIG_CACHE_DIR names. A folder that cannot be used (read-only home, no home, not private)
means a private temporary one for the process, with one warning: builds still work.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from ...errors import CacheError, JitflowError
from ...files import folder_trust
from ...logs import warn_once

_chosen: dict[Path | None, Path] = {}
_lock = threading.Lock()


def private_folder(path: Path) -> Path:
    """Create `path` (and its missing parents) private to this user, or check it, and return it.

    The guarantees are files/folder_trust.py's, the same as for the cache's own folders: folders created
    here get mode 0700 at creation; an existing one of this user is narrowed to 0700; every folder
    on the way from / (and every symbolic link) belongs to this user or to root and is writable by
    no one else, root's sticky folders such as /tmp aside. Anything else (another user's folder, a
    folder others can write, a file in the way, a read-only parent) is a CacheError naming the
    folder and the fix.
    """
    try:
        return folder_trust.make_private_folder(path, fix="set JITFLOW_ZIG_CACHE_DIR to a folder of your own")
    except OSError as exc:
        raise CacheError(f"cannot create zig's cache folder {path}: {exc.strerror or exc}; "
                         "set JITFLOW_ZIG_CACHE_DIR to a writable folder") from None


def default_location() -> Path:
    """`<user cache folder>/jitflow/toolchain/zig-<version>`: one per user and zig version."""
    import platformdirs

    from . import zig_wheel

    try:
        version = zig_wheel.version()
    except JitflowError:
        version = "unknown"
    return Path(platformdirs.user_cache_dir("jitflow", appauthor=False)) / "toolchain" / f"zig-{version}"


def folder(configured: Path | None = None) -> Path:
    """The zig cache folder this process uses: `configured` (JITFLOW_ZIG_CACHE_DIR) or the default,
    made private; if that cannot be used, a private temporary folder, with one warning."""
    with _lock:
        if configured in _chosen:
            return _chosen[configured]
        wanted = Path(configured) if configured is not None else default_location()
        try:
            chosen = private_folder(wanted)
        except CacheError as exc:
            chosen = _temporary(default_location().name)
            warn_once("zig cache fallback", "jitflow: %s; using %s for this process instead", exc, chosen)
        _chosen[configured] = chosen
        return chosen


def _temporary(name: str) -> Path:
    """/tmp/jitflow-<uid>/toolchain/<name> if it is private to us, else a fresh private folder."""
    shared = Path(tempfile.gettempdir()) / f"jitflow-{os.getuid()}" / "toolchain" / name
    try:
        return private_folder(shared)
    except CacheError:
        return Path(tempfile.mkdtemp(prefix=f"jitflow-zig-{os.getuid()}-"))
