"""The zig of the `ziglang` wheel: where its binary is, and which version it is.

Apart from zig.py (the commands zig runs) so that the cache key can name zig's version without
importing the compile machinery: a cache hit takes a key, and compiles nothing.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path

from ...errors import ToolMissingError
from .. import dist_info, install_memo

#: the install memo of the version zig itself says, for a zig without package metadata
MEMO = "zig-version"


@lru_cache(maxsize=1)
def zig_binary() -> str:
    """The zig executable inside the installed ziglang package (found, not imported)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.submodule_search_locations:
        raise ToolMissingError("the ziglang package is not installed; pip install ziglang")
    exe = Path(list(spec.submodule_search_locations)[0]) / "zig"
    if not exe.is_file():
        raise ToolMissingError(f"the ziglang package has no zig binary at {exe}; reinstall ziglang")
    return str(exe)


@lru_cache(maxsize=1)
def version() -> str:
    """Version of zig (part of the cache key): the wheel's metadata, else `zig version`, whose answer
    is memoized with the binary's stat (a subprocess costs a hit milliseconds)."""
    binary = zig_binary()
    found = dist_info.version("ziglang", [dist_info.site_of(Path(binary).parent)])
    if found:
        return found
    st = os.stat(binary)
    stamp = [binary, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    memo = install_memo.read(MEMO)
    if isinstance(memo, dict) and memo.get("binary") == stamp and isinstance(memo.get("version"), str) \
            and re.fullmatch(r"[\w.+-]{1,64}", memo["version"]):           # what `zig version` prints
        return memo["version"]
    proc = subprocess.run([binary, "version"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ToolMissingError("zig does not run (`zig version` failed); reinstall ziglang")
    install_memo.write(MEMO, {"binary": stamp, "version": proc.stdout.strip()})
    return proc.stdout.strip()
