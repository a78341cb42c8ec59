"""A Ray worker hook for the farm's tests (runtime_env's worker_process_setup_hook "die_once.arm"):
kill a worker in the middle of a build, once per armed file.

DIE_ONCE_FOLDER names a folder; a build whose key has a file there (`<key>`, `<key>.2`, ...: one
death each) removes one, and a watcher ends the process as soon as the key's staging folder
exists, that is while the build holds the key's lock and has written part of its entry."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def arm() -> None:
    """Wrap Executable.build in this process (a Ray worker) with the armed deaths."""
    from jitflow.executable import Executable

    folder = os.environ.get("DIE_ONCE_FOLDER")
    if not folder:
        return
    original = Executable.build

    def build(self, *args, **kwargs):
        _die_if_armed(Path(folder), self)
        return original(self, *args, **kwargs)

    Executable.build = build


def _die_if_armed(folder: Path, exe) -> None:
    from jitflow.cache.store import location

    key = exe.key
    for armed in sorted(folder.glob(f"{key}*")):
        try:
            armed.unlink()              # only one process can remove it: that one dies
        except OSError:
            continue
        staging = Path(location.open_cache(exe.settings).for_building().staging_root)
        threading.Thread(target=_exit_once_staging, args=(staging, key), daemon=True).start()
        return


def _exit_once_staging(staging: Path, key: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(staging.glob(f"*{key[:16]}.*")):
        time.sleep(0.0005)
    os._exit(70)
