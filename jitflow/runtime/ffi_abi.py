"""Whether a library built against one tvm-ffi can be loaded by another: checked before dlopen.

A library jitflow builds is C compiled against tvm-ffi's headers (`tvm/ffi/c_api.h`): it calls tvm-ffi's
stable C ABI and nothing of its C++ API, and its digest record states the tvm-ffi it was built against
(formats/library_digest.py). tvm-ffi promises that C ABI stable, and its releases so far changed only
the C++ API and what the C ABI adds (the 0.1 releases: the C ABI unaffected, new functions older
libraries do not have); before 1.0 a minor release may still change it. So:

- another version of the same minor series (0.1.14 against 0.1.15) loads, with one warning naming both;
- another minor or major version (0.1 against 0.2) is a LoadError: install the tvm-ffi it was built
  against, or build it again here;
- a library whose record states none (built before records did, or TVM's own) is not checked.

Both sides read the version tvm-ffi states of itself (`tvm_ffi.__version__`, what its wheel's metadata
says too: the cache key reads that, toolchain/versions.py), which every load imports anyway.
"""
from __future__ import annotations

import os
import re

from ..errors import LoadError
from ..logs import warn_once

_SERIES = re.compile(r"(\d+)\.(\d+)(?:\.|$)")


def installed() -> str:
    """The version of the tvm-ffi this process loads libraries with ('0.1.14.post0')."""
    import tvm_ffi

    return str(getattr(tvm_ffi, "__version__", "unknown"))


def series(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version ('0.1.14.post0' -> (0, 1)); None for text that is not one."""
    found = _SERIES.match(version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def check(recorded: str | None, path: str | os.PathLike, here: str | None = None) -> None:
    """Say when the library at `path`, built against tvm-ffi `recorded`, is loaded by another tvm-ffi
    (`here`: this process's): a warning within one minor series, else a LoadError."""
    here = installed() if here is None else here
    if recorded is None or recorded == here:
        return
    mine, theirs = series(here), series(recorded)
    if mine is None or mine != theirs:
        raise LoadError(f"cannot load {path}: it was built against tvm-ffi {recorded}, and this process has tvm-ffi "
                        f"{here}, whose C ABI may differ from it (before 1.0, tvm-ffi keeps its C ABI within a minor "
                        f"version only). Fix: pip install apache-tvm-ffi=={recorded} where it is loaded, or build it "
                        "again with this tvm-ffi")
    warn_once(f"tvm-ffi {recorded} {here}", "jitflow: %s was built against tvm-ffi %s and is loaded by tvm-ffi %s: "
              "tvm-ffi keeps its C ABI within %d.%d, so it is loaded; to run what was built and tested, install "
              "apache-tvm-ffi==%s here or build it again", path, recorded, here, *mine, recorded)
