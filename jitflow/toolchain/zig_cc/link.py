"""Objects -> a shared library with zig, against the stub C libraries and builtins of host_libs.py
(TVM's own symbols resolve when the runtime loads the library), ended by its digest record
(formats/library_digest.py)."""
from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ...formats import elf_object, library_digest
from . import host_libs, zig
from ..deadline import Deadline

log = logging.getLogger("jitflow")


def _flags(host: str, zig_cache: Path, compiler_rt: bool) -> tuple[list[str], list[str]]:
    """The link's flags before and after its inputs (the stub C libraries made now if need be)."""
    return (["-shared", "-nodefaultlibs" if compiler_rt else "-nostdlib", "-Wl,--build-id=none"],
            ["-Wl,--no-as-needed", *[str(p) for p in host_libs.stubs(host, zig_cache)]])


def prepare(host: str, zig_cache: Path) -> None:
    """Make what a link of TVM's C needs now (the stub C libraries, the linker's command), so that a
    first build does it while TVM lowers and the host C compiles, not after."""
    before, after = _flags(host, zig_cache, False)
    zig.prepare_link(before, after, host, zig_cache)


def link_shared(inputs: Sequence[Path], out: Path, host: str, zig_cache: Path, local_cache: Path | None = None,
                show: Callable[[str], None] | None = None, data: Sequence[Path] = (),
                needs: Iterable[str] = (), cpu: dict[str, Any] | None = None,
                device_code: dict[str, Any] | None = None, deadline: Deadline | None = None,
                tvm_ffi: str | None = None) -> None:
    """Link objects (and assembly files) into `out`; `data` are more objects that hold data only.
    The library ends with its digest record, which states `needs` (what of the TVM runtime it needs
    beyond the core: "cuda", "contrib"), `cpu` (its CPU level and the CPU features its code needs:
    target/cpu_level.record), `device_code` (the SASS and PTX its fatbins carry:
    runtime/compat.DeviceCode.to_record), which a load checks against the fatbins and the GPU, and
    `tvm_ffi` (the version whose headers it was compiled against: runtime/ffi_abi.py checks it).

    Without zig's libc and compiler runtime unless the code objects need a builtin that host_libs does
    not provide; then zig's compiler runtime is linked too (built once per zig cache folder: `show`
    is told, for the progress line).
    """
    cwd = out.parent
    marker = cwd / "digest-marker.o"      # the section saying that the library ends with a digest record
    elf_object.write(struct.pack("<I", library_digest.VERSION), marker, host, library_digest.SECTION, symbol=None)
    data = [*data, marker]
    provided, missing = host_libs.needed_builtins(p for p in inputs if p.suffix == ".o")
    archive = [str(host_libs.builtins_archive(host, zig_cache))] if provided else []
    if missing:
        log.info("jitflow: %s need zig's compiler runtime", ", ".join(sorted(missing)))
        if show:
            show(f"building zig's compiler runtime for {host} (once per machine)")
    before, after = _flags(host, zig_cache, bool(missing))
    zig.link(before, [*[str(p.relative_to(cwd)) for p in [*inputs, *data]], *archive], after, out.name, host, cwd,
             zig_cache, local_cache, deadline)
    marker.unlink(missing_ok=True)
    fields: dict[str, Any] = {"needs": sorted(set(needs))}
    if cpu is not None:
        fields["cpu"] = cpu
    if device_code is not None:
        fields["cuda"] = device_code
    if tvm_ffi is not None:
        fields["tvm_ffi"] = tvm_ffi
    library_digest.seal(out, fields)
