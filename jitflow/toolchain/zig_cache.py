"""Where zig's cache lives: one private folder per user and zig version, shared by every jitflow
cache folder on the machine, so that a new JITFLOW_CACHE_DIR pays no toolchain set-up again.

The default is `<user cache folder>/jitflow/toolchain/zig-<version>` (platformdirs), or the folder
JITFLOW_ZIG_CACHE_DIR names. A folder that cannot be used (read-only home, no home, not private)
means a private temporary one for the process, with one warning: builds still work.
"""
from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

from ..errors import CacheError, JitflowError
from ..logs import warn_once

_chosen: dict[Path | None, Path] = {}
_lock = threading.Lock()


def private_folder(path: Path) -> Path:
    """Create `path` (and its missing parents) or check it, and return its real path.

    Guarantees, checked on the real path (symbolic links resolved once, here):
    - folders this function creates get mode 0700;
    - the folder itself is owned by this user, and no other user can read, write or enter it
      (an existing folder of this user with group or other bits is tightened to 0700);
    - every folder above it, up to /, is owned by this user or by root and is not writable by
      group or others, unless it has the sticky bit (as /tmp has);
    - anything else (another user's folder, a writable parent, a file in the way) is refused
      with a CacheError naming the folder and the fix.
    """
    path = Path(os.path.abspath(path))
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    real = Path(os.path.realpath(existing))
    _check_ancestors(real if existing != path else real.parent)
    try:
        for part in path.relative_to(existing).parts:
            real = real / part
            try:
                os.mkdir(real, 0o700)
            except FileExistsError:
                pass       # made by a racing process of ours: checked below like any other
        info = os.lstat(real)
        if not stat.S_ISDIR(info.st_mode):
            raise CacheError(f"{real} is not a folder; set JITFLOW_ZIG_CACHE_DIR to a private folder")
        if info.st_uid != os.getuid():
            raise CacheError(f"zig's cache folder {real} belongs to another user; "
                             "set JITFLOW_ZIG_CACHE_DIR to a folder of your own")
        if info.st_mode & 0o077:
            os.chmod(real, 0o700)
    except OSError as exc:
        raise CacheError(f"cannot create zig's cache folder {real}: {exc.strerror}; "
                         "set JITFLOW_ZIG_CACHE_DIR to a writable folder") from None
    _check_ancestors(real.parent)
    return real


def _check_ancestors(folder: Path) -> None:
    """Refuse when a folder above (up to /) belongs to another user or is writable by others."""
    uid = os.getuid()
    for parent in [folder, *folder.parents]:
        try:
            info = os.stat(parent)
        except OSError as exc:
            raise CacheError(f"cannot check {parent}: {exc.strerror}") from None
        sticky = bool(info.st_mode & stat.S_ISVTX)
        if info.st_uid not in (uid, 0) or (info.st_mode & 0o022 and not sticky):
            raise CacheError(f"{parent} (above zig's cache folder) is writable by or belongs to another "
                             "user; set JITFLOW_ZIG_CACHE_DIR to a folder only you control")


def default_location() -> Path:
    """`<user cache folder>/jitflow/toolchain/zig-<version>`: one per user and zig version."""
    import platformdirs

    from . import zig

    try:
        version = zig.version()
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
