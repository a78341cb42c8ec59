"""PTX that the floor's driver can JIT: lower the ISA a compiler declared to the floor's, and prove the
code valid at that ISA by assembling it there (nvJitLink, or ptxas beside nvcc).

NVRTC and nvcc write the PTX ISA of their own CUDA version (NVRTC 13.5: `.version 9.5`), which
only a driver of that version or newer JIT-compiles; neither can be told to write an older one.
The kernels TVM generates rarely use anything new, so the same text usually is valid PTX of the
floor's ISA; ptxas checks every instruction against the declared `.version` and refuses what is
newer, so a text it accepts at the floor's ISA is one the floor's driver accepts too.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from ...errors import CompileError, ToolMissingError
from ...formats import fatbin
from ...formats import ptx as ptx_text
from ...targets.cuda_floor import CudaVersion, cuda_for_ptx_isa, isa_text, ptx_isa_for
from . import cuda_toolkit, fatbin_build, nvjitlink


def assemble(ptx: bytes, arch: str) -> None:
    """Assemble PTX for `arch` ('sm_80'), raising CompileError with ptxas' log where it is refused."""
    if nvjitlink.available():
        nvjitlink.assemble(ptx, arch)
        return
    tool = cuda_toolkit.find("ptxas")
    if tool is None:
        raise ToolMissingError(f"checking PTX against the CUDA floor needs nvJitLink; {nvjitlink.INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="jitflow-ptx-") as tmp:
        src = Path(tmp) / "kernels.ptx"
        src.write_bytes(ptx.rstrip(b"\0"))
        cmd = [tool, f"-arch={arch}", str(src), "-o", str(Path(tmp) / "kernels.cubin")]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError("ptxas", cmd, proc.stdout + proc.stderr)


def to_isa(ptx: bytes, arch: str, isa: tuple[int, int], source: Path | None = None) -> bytes:
    """`ptx` declaring at most ISA `isa`: as it is when it already does, else lowered and proven valid."""
    have = ptx_text.isa(ptx)
    if have <= isa:
        return ptx
    lowered = ptx_text.with_isa(ptx, isa)
    try:
        assemble(lowered, arch)
    except CompileError as exc:
        needs = cuda_for_ptx_isa(have)
        raise CompileError(
            "the CUDA floor check", f"assemble the {arch} PTX at PTX ISA {isa_text(isa)}",
            f"the kernels' PTX uses features newer than PTX ISA {isa_text(isa)}, the newest the floor's driver "
            f"can JIT-compile; raise cuda_floor (to {needs or 'the compiler version'}, the driver that JITs "
            f"PTX ISA {isa_text(have)}), or change the kernels. ptxas said:\n{exc.log}", source) from None
    return lowered


def to_floor(ptx: bytes, arch: str, floor: CudaVersion, source: Path | None = None) -> bytes:
    """`ptx` (written for `arch`) at an ISA the driver of CUDA `floor` JIT-compiles."""
    return to_isa(ptx, arch, ptx_isa_for(floor), source)


def fatbin_to_floor(data: bytes, floor: CudaVersion, source: Path | None = None) -> bytes:
    """A fatbin whose PTX entries the floor's driver JIT-compiles (rebuilt only where one was lowered)."""
    found = fatbin.entries(data)
    wanted = ptx_isa_for(floor)
    if all(e.kind != "ptx" or ptx_text.isa(fatbin.contents(data, e)) <= wanted for e in found):
        return data
    images = []
    for e in found:
        body = fatbin.contents(data, e)
        if e.kind == "ptx":
            body = to_isa(body, "sm_" + e.arch.split("_", 1)[1], wanted, source)
        images.append(fatbin_build.Image(e.kind, e.arch, body))
    return fatbin_build.build(images)


def check_fatbin(data: bytes, floor: CudaVersion, source: Path | None = None) -> list[tuple[str, str]]:
    """[(PTX arch, ISA)] of the fatbin, read from the PTX text itself; a CompileError if any is newer
    than the floor's driver JIT-compiles or disagrees with the entry's header."""
    wanted = ptx_isa_for(floor)
    out = []
    for e in fatbin.entries(data):
        if e.kind != "ptx":
            continue
        isa = ptx_text.isa(fatbin.contents(data, e))
        if isa > wanted or (e.isa is not None and e.isa != isa_text(isa)):
            raise CompileError("the CUDA floor check", "read the fatbin's PTX",
                               f"the {e.arch} PTX declares ISA {isa_text(isa)} (header: {e.isa}); a driver of "
                               f"CUDA {floor} JIT-compiles PTX ISA {isa_text(wanted)} at most", source)
        out.append((e.arch, isa_text(isa)))
    return out
