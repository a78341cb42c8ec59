"""Objects -> a shared library with zig, against the stub C libraries and builtins of host_libs.py
(TVM's own symbols resolve when the runtime loads the library)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Sequence

from . import host_libs, zig

log = logging.getLogger("jitflow")


def link_shared(inputs: Sequence[Path], out: Path, host: str, zig_cache: Path, local_cache: Path | None = None,
                show: Callable[[str], None] | None = None) -> None:
    """Link objects (and assembly files) into `out`.

    Without zig's libc and compiler runtime unless the objects need a builtin that host_libs does not
    provide; then zig's compiler runtime is linked too (built once per zig cache folder: `show` is
    told, for the progress line).
    """
    cwd = out.parent
    libs = host_libs.folder(host, zig_cache)
    missing = host_libs.missing_builtins(p for p in inputs if p.suffix == ".o")
    if missing:
        log.info("jitflow: %s need zig's compiler runtime", ", ".join(sorted(missing)))
        if show:
            show(f"zig's compiler runtime for {host} (once per machine)")
    runtime = "-nodefaultlibs" if missing else "-nostdlib"
    zig.run([*zig.flags(host, cwd), "-shared", runtime, "-Wl,--build-id=none",
             *[str(p.relative_to(cwd)) for p in inputs], str(libs / host_libs.ARCHIVE),
             "-Wl,--no-as-needed", *[str(libs / name) for name in host_libs.STUBS], "-o", out.name],
            cwd=cwd, zig_cache=zig_cache, local_cache=local_cache)
