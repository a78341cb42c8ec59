"""CUDA source -> fatbin with the compiler the user chose (NVRTC by default, or nvcc), for a CUDA floor.

What jitflow.compile asks of it on every call, cache hits included (the archs of "portable", the
default CUDA floor), imports no compiler: the compilers and the PTX checks are imported by the
functions that compile.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...errors import TargetError
from ...targets.archs import arch_number, is_portable, portable_archs
from ...targets.cuda_floor import CudaVersion
from .. import versions

if TYPE_CHECKING:
    from .cuda_flags import CudaFlags


def compile_fatbin(source_path: Path, archs: Sequence[str], compiler: str, options: Sequence[str] = (),
                   on_arch: Callable[[str, float], None] | None = None,
                   floor: CudaVersion | None = None, text: str | None = None,
                   flags: CudaFlags | None = None) -> tuple[bytes, str]:
    """Fatbin with SASS for every arch and PTX for the lowest, plus the compiler's log.

    floor: the fatbin's PTX is brought to an ISA the driver of that CUDA version JIT-compiles, and
    the PTX ISA is then read back from the fatbin itself and checked. text (NVRTC only): compile
    this instead of the file's source (a piece of it, see builder/device_compile.py). flags: the
    defines and ptxas flags to start from (cuda_flags.for_build: TVM's CUDA variables applied;
    default TVM's own flags).
    """
    from . import ptx_floor
    from .cuda_flags import CudaFlags

    flags = CudaFlags() if flags is None else flags

    if compiler == "nvcc":
        from . import nvcc

        start = time.perf_counter()
        data, log = nvcc.compile_fatbin(source_path, archs, options, flags)
        if floor is not None:
            data = ptx_floor.fatbin_to_floor(data, floor, source_path)
        if on_arch:
            on_arch("+".join(archs), time.perf_counter() - start)
    else:
        from . import nvrtc

        source = source_path.read_text() if text is None else text
        data, log = nvrtc.compile_fatbin(source, archs, options, source_path, on_arch, floor, flags)
    if floor is not None:
        found = ptx_floor.check_fatbin(data, floor, source_path)
        log += "".join(f"\n== PTX {arch}: ISA {isa} (CUDA floor {floor}) ==" for arch, isa in found)
    return data, log


def compiler_version(compiler: str) -> CudaVersion:
    """The CUDA version of the device compiler: the NVRTC wheel's, or nvcc's release."""
    if compiler == "nvcc":
        from . import nvcc

        m = re.search(r"(?:release |cuda_)(\d+)\.(\d+)", nvcc.version())
        return CudaVersion(int(m.group(1)), int(m.group(2))) if m else CudaVersion(0, 0)
    from . import nvrtc

    return nvrtc.cuda_version()


def default_floor(compiler: str) -> CudaVersion:
    """The oldest driver of the compiler's CUDA major version: 13.0 for NVRTC 13.5.

    For NVRTC the major version is read from the wheel's metadata (no library is loaded, and nvrtc.py
    is not imported: this runs on every jitflow.compile, cache hits included).
    """
    if compiler != "nvcc":
        m = re.search(r"nvidia-cuda-nvrtc==(\d+)\.", versions.nvrtc())
        if m:
            return CudaVersion(int(m.group(1)), 0)
    return CudaVersion(compiler_version(compiler).major, 0)


def expand_archs(arch: Any, compiler: str) -> Any:
    """arch= as given, or for "portable" the lowest arch of each GPU generation the compiler supports."""
    if arch is None or not is_portable(arch):
        return arch
    return list(portable_archs(supported_archs(compiler)))


def supported_archs(compiler: str) -> tuple[str, ...]:
    """The SASS archs the device compiler builds ('sm_75', ...)."""
    if compiler == "nvcc":
        from . import nvcc

        return nvcc.supported_archs()
    from . import nvrtc

    return nvrtc.supported_archs()


def check_archs(archs: Sequence[str], compiler: str) -> None:
    """Refuse, before anything is built, an arch the device compiler does not build (sm_70 with
    NVRTC 13, which starts at sm_75): a TargetError naming the compiler and the archs it builds.
    An arch-specific variant (sm_90a) goes with its arch."""
    supported = supported_archs(compiler)
    numbers = {arch_number(a) for a in supported if re.fullmatch(r"sm_\d+", a)}
    missing = [a for a in archs if arch_number(a) not in numbers]
    if not missing:
        return
    name = "nvcc" if compiler == "nvcc" else "NVRTC"
    oldest = min(supported, key=arch_number) if supported else "none"
    raise TargetError(f"CUDA arch {', '.join(missing)} is not built by the installed {name} "
                      f"{compiler_version(compiler)}: it builds {', '.join(supported) or 'no arch'} (the oldest is "
                      f"{oldest}); choose among those, or install a device compiler that builds "
                      f"{'them' if len(missing) > 1 else 'it'}")


def ptx(source: str, arch: str, compiler: str, options: Sequence[str], flags: CudaFlags) -> str:
    """The PTX the device compiler makes of `source` for `arch` with a build's options and flags (for
    a report: the fatbin keeps PTX for the lowest arch only)."""
    if compiler == "nvcc":
        from . import nvcc

        return nvcc.ptx(source, arch, options, flags)
    from . import nvrtc

    return nvrtc.ptx(source, arch, options, flags)
