"""Whether this host can run a library, said before anything loads it (`jitflow cache check`).

jitflow.load refuses a library it cannot run at load time (load.py: the CPU it was built for, its
CPU level's features, the GPU and driver for device code); a rollout check asks the same questions
of every entry before serving, without loading any, and answers them all at once:

- the host triple it was built for against this machine's, and the glibc its symbols ask for
  against this host's (a library jitflow links asks for none: any glibc 2.17 or newer);
- the CPU features its CPU level needs against this CPU's (cpu_features.py);
- for device code, the GPU it will serve on: the arch given (`--arch`), else the visible GPU, and
  the installed driver, else the entry's CUDA floor (the oldest driver it was built for): SASS that
  runs there, or PTX at or below the arch that the driver can JIT (compat.py decides both).
"""
from __future__ import annotations

import os
import platform
from typing import NamedTuple

from ..errors import JitflowError, LibraryFormatError, LoadError
from ..targets.archs import normalize_arch
from ..targets.cuda_floor import MIN_FLOOR, CudaVersion, parse
from ..targets.hosts import machine_host
from . import compat, cpu_features, library_check
from .library_file import LibraryFile

#: the section that lists the versioned symbols a library needs (glibc's among them)
_VERSIONS = ".gnu.version_r"
#: the oldest glibc jitflow's libraries load on (manylinux2014)
GLIBC_FLOOR = (2, 17)


class AssumedGpu(NamedTuple):
    """The GPU a check assumes: its arch (None: none to check against), the driver's CUDA version
    (None: no driver here, each entry's CUDA floor is assumed), and where they came from."""

    arch: str | None
    driver: CudaVersion | None
    source: str

    def describe(self) -> str:
        if self.arch is None:
            return f"no GPU ({self.source})"
        driver = f"driver CUDA {self.driver}" if self.driver else "no driver here (each entry's CUDA floor assumed)"
        return f"{self.arch} ({self.source}), {driver}"


def assumed_gpu(arch: str | None = None, query: compat.DeviceQuery | None = None) -> AssumedGpu:
    """The GPU to check device code against: `arch` (with this machine's driver, if any), else the
    first visible GPU and its driver (`query`: default the CUDA driver), else none (said why)."""
    if arch is not None:
        return AssumedGpu(normalize_arch(arch), compat.driver_version(), f"--arch {arch}")
    gpu = (query or compat.DriverQuery()).gpu(0)
    if gpu is None:
        return AssumedGpu(None, None, "no GPU is visible here")
    return AssumedGpu(gpu.arch, gpu.driver, f"GPU 0{': ' + gpu.name if gpu.name else ''}")


def glibc_here() -> tuple[int, ...] | None:
    """This host's glibc version, (2, 36); None where the C library is not glibc (musl)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    try:
        return tuple(int(x) for x in version.split(".")) if name == "glibc" else None
    except ValueError:
        return None


def _glibc(library: LibraryFile) -> list[str]:
    """Why this host's glibc is too old for the library (the highest GLIBC_x.y it asks for), or nothing."""
    from ..formats.elf_file import ElfFile

    here = glibc_here()
    if here is None:
        return [f"this host's C library is not glibc ({platform.libc_ver()[0] or 'unknown'}): jitflow's libraries "
                f"need glibc {'.'.join(map(str, GLIBC_FLOOR))} or newer (run a glibc-based image, not Alpine)"]
    needed = GLIBC_FLOOR
    if ElfFile(library.fd).has_section(_VERSIONS):      # a library jitflow links has no versioned symbols
        from ..formats import elf

        baseline = elf.read(library.path).glibc_baseline
        if baseline:
            needed = max(needed, tuple(int(x) for x in baseline.split(".")))
    if here < needed:
        return [f"it needs glibc {'.'.join(map(str, needed))} or newer, and this host has {'.'.join(map(str, here))}"]
    return []


def _device(library: LibraryFile, stated: object, gpu: AssumedGpu, floor: str | None) -> list[str]:
    """Why the assumed GPU and driver cannot run the library's device code, or nothing."""
    if gpu.arch is None:
        return [f"it holds device code and {gpu.source}: give --arch sm_XY, the arch of the GPU it will serve on"]
    try:
        driver = gpu.driver or (parse(floor, "the entry's CUDA floor") if floor else MIN_FLOOR)
        code = compat.device_code(library)
    except JitflowError as exc:
        return [f"its device code cannot be read ({exc}); build or copy it again"]
    recorded = compat.DeviceCode.from_record(stated) if stated is not None else None
    if recorded is not None and recorded != code:
        return ["its digest record states other device code than its fatbins carry; build or copy it again"]
    if code is None or compat.problem(code, compat.Gpu(gpu.arch, driver)) is None:
        return []
    promised = parse(floor, "the entry's CUDA floor") if floor else None
    older = f"; it was built for drivers of CUDA {promised} or newer" if promised and driver < promised else ""
    return [f"{gpu.arch} with a driver of CUDA {driver} runs none of its device code: it carries {code.describe()}"
            f"{older} (rebuild with arch=[..., '{gpu.arch}'] or arch='portable', or update the driver)"]


def problems(library: LibraryFile, host: str | None, gpu: AssumedGpu, floor: str | None = None) -> list[str]:
    """Why this host cannot run the library open in `library`, built for `host` (a triple), each in a
    line: [] when it can. `gpu` is the GPU its device code must run on; `floor` the entry's CUDA floor."""
    here = machine_host()
    if host != here:
        return [f"it is built for {host}, and this host is {here or platform.machine()}"]
    try:
        checked = library_check.check(library.fd, verify=True)
        found = _glibc(library)
    except LibraryFormatError as exc:
        return [f"its library cannot be loaded: {exc}"]
    try:
        lacking = cpu_features.missing(checked.cpu_needs)
    except LoadError as exc:
        lacking, found = [], found + [str(exc)]
    if lacking:
        level = f" (CPU level {checked.cpu_level})" if checked.cpu_level else ""
        model = cpu_features.this_cpu().model
        found.append(f"it needs the CPU features {', '.join(lacking)}{level}, which this CPU"
                     f"{' (' + model + ')' if model else ''} lacks")
    if "cuda" in checked.needs:
        found += _device(library, checked.device_code, gpu, floor)
    return found
