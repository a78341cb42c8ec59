"""Before TVM loads a CUDA library: can this GPU, with this driver, run it?

A GPU runs a library's kernels from SASS of its own generation (sm_XY runs on sm_XZ for Z >= Y)
built by a compiler of the driver's CUDA major version or older, or by JIT-compiling PTX written
for its arch or an older one, at a PTX ISA the driver knows. When neither holds, TVM fails only at
the first call with a bare CUDA error (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, NO_BINARY_FOR_GPU);
jitflow raises a LoadError at load time instead that says what the GPU and the library have and
how to rebuild.

The GPU and driver come from a DeviceQuery: the CUDA driver by default, a SimulatedGpu in tests
and for checking a library against another machine.
"""
from __future__ import annotations

import os
from typing import Any, NamedTuple, Protocol

from ..errors import JitflowError, LoadError
from ..targets.archs import arch_number, normalize_arch
from ..targets.cuda_floor import MIN_FLOOR, CudaVersion, cuda_for_ptx_isa, parse, parse_isa


class Gpu(NamedTuple):
    """One GPU as the driver reports it: arch ('sm_90'), the driver's CUDA version, name, index."""

    arch: str
    driver: CudaVersion
    name: str = ""
    index: int = 0


class DeviceQuery(Protocol):
    def gpu(self, index: int) -> Gpu | None:
        """GPU `index`, or None where there is no driver or no such device."""


class DriverQuery:
    """The CUDA driver's view: compute capability, name, and the driver's CUDA version.

    Asked through libcuda.so.1 directly (ctypes): importing cuda.bindings' driver module would add
    tens of milliseconds to every load, and the runtime-only install loading the library may lack it.
    """

    _MAJOR, _MINOR = 75, 76   # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR

    def gpu(self, index: int) -> Gpu | None:
        import ctypes

        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return None
        version, dev, major, minor = (ctypes.c_int() for _ in range(4))
        name = ctypes.create_string_buffer(256)
        if (lib.cuDriverGetVersion(ctypes.byref(version)) or lib.cuInit(0)
                or lib.cuDeviceGet(ctypes.byref(dev), index)
                or lib.cuDeviceGetAttribute(ctypes.byref(major), self._MAJOR, dev)
                or lib.cuDeviceGetAttribute(ctypes.byref(minor), self._MINOR, dev)):
            return None   # no usable device: TVM's loader reports what is wrong
        lib.cuDeviceGetName(name, len(name), dev)
        return Gpu(f"sm_{major.value}{minor.value}", CudaVersion.from_driver(version.value),
                   name.value.decode(errors="replace"), index)


def driver_version() -> CudaVersion | None:
    """The installed CUDA driver's version (no GPU needed), or None where there is no driver."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(version)) or version.value <= 0:
        return None
    return CudaVersion.from_driver(version.value)


class SimulatedGpu(NamedTuple):
    """A GPU and driver given by hand: SimulatedGpu('sm_90', '13.0') answers for every index."""

    arch: str
    driver: CudaVersion | str
    name: str = "simulated GPU"

    def gpu(self, index: int) -> Gpu | None:
        return Gpu(normalize_arch(self.arch), parse(self.driver, "driver"), self.name, index)


class DeviceCode(NamedTuple):
    """What a library's fatbins carry: SASS archs (and the CUDA version that built them), PTX archs
    with their PTX ISA."""

    sass: tuple[str, ...]
    ptx: tuple[tuple[str, str], ...]          # (compute_80, "9.0")
    sass_toolkit: CudaVersion | None = None   # the newest compiler among the cubins

    def describe(self) -> str:
        parts = []
        if self.sass:
            built = f" (built by CUDA {self.sass_toolkit})" if self.sass_toolkit else ""
            parts.append(f"SASS for {', '.join(self.sass)}{built}")
        for arch, isa in self.ptx:
            need = cuda_for_ptx_isa(parse_isa(isa))
            parts.append(f"PTX {arch} at PTX ISA {isa}" + (f" (a driver of CUDA {need} or newer JITs it)"
                                                             if need else ""))
        return " and ".join(parts) or "no device code"

    def to_record(self) -> dict[str, Any]:
        """The form a library's digest record keeps it in (toolchain/zig_cc/link.py writes it)."""
        return {"sass": list(self.sass), "ptx": [list(p) for p in self.ptx],
                "sass_toolkit": None if self.sass_toolkit is None else str(self.sass_toolkit)}

    @classmethod
    def from_record(cls, data: Any) -> DeviceCode | None:
        """The device code a digest record states, or None when it states none in a form this reader
        knows (the fatbins are then read: a damaged statement never passes as "runs anywhere")."""
        if not isinstance(data, dict) or set(data) != {"sass", "ptx", "sass_toolkit"}:
            return None
        sass, ptx, toolkit = data["sass"], data["ptx"], data["sass_toolkit"]
        archs_ok = isinstance(sass, list) and all(isinstance(a, str) and a.startswith("sm_") for a in sass)
        pairs_ok = isinstance(ptx, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) and p[0].startswith("compute_")
            for p in ptx)
        if not (archs_ok and pairs_ok):
            return None
        try:
            for arch in [*sass, *("sm_" + p[0].split("_", 1)[1] for p in ptx)]:
                arch_number(normalize_arch(arch))
            for _, isa in ptx:
                parse_isa(isa)
            version = None if toolkit is None else parse(toolkit, "sass_toolkit")
        except (JitflowError, TypeError, ValueError):
            return None
        return cls(tuple(sass), tuple((p[0], p[1]) for p in ptx), version)


def device_code_of_fatbins(fatbins: list[bytes]) -> DeviceCode:
    from ..formats import cubin, fatbin   # libraries that record their device code are loaded without them

    sass: list[str] = []
    ptx: list[tuple[str, str]] = []
    toolkit: CudaVersion | None = None
    for data in fatbins:
        for e in fatbin.entries(data):
            if e.kind == "sass":
                sass.append(e.arch)
                found = cubin.toolkit_version(fatbin.contents(data, e)) if e.compression != "unknown" else None
                if found and (toolkit is None or CudaVersion(*found) > toolkit):
                    toolkit = CudaVersion(*found)
            elif e.kind == "ptx" and e.isa:
                ptx.append((e.arch, e.isa))
    order = lambda a: arch_number("sm_" + a.split("_", 1)[1])  # noqa: E731
    return DeviceCode(tuple(sorted(set(sass), key=order)), tuple(sorted(set(ptx), key=lambda p: order(p[0]))),
                      toolkit)


def device_code(path: str | os.PathLike) -> DeviceCode | None:
    """The device code of a library's CUDA modules, or None where it has no fatbin to read."""
    from ..formats import library_blob

    fatbins = []
    for raw in library_blob.payloads_of(path, "cuda") or []:   # the CUDA modules alone: weights are not read
        payload = library_blob.parse_cuda_payload(raw)
        if payload.fmt == "fatbin":
            fatbins.append(payload.data)
    return device_code_of_fatbins(fatbins) if fatbins else None


def _base(arch: str) -> tuple[int, bool]:
    """(arch number, whether it is an arch-specific 'a'/'f' variant)."""
    return arch_number(arch), arch[-1] in "af"


def runs_sass(code: DeviceCode, gpu: Gpu) -> bool:
    """Whether some SASS of the library runs on the GPU with its driver."""
    have = arch_number(gpu.arch)
    if code.sass_toolkit is not None and gpu.driver.major < code.sass_toolkit.major:
        return False
    for arch in code.sass:
        number, specific = _base(arch)
        if (number == have) if specific else (number // 10 == have // 10 and number <= have):
            return True
    return False


def runs_ptx(code: DeviceCode, gpu: Gpu) -> bool:
    """Whether the driver can JIT-compile some PTX of the library for the GPU."""
    for arch, isa in code.ptx:
        need = cuda_for_ptx_isa(parse_isa(isa))
        if arch_number("sm_" + arch.split("_", 1)[1]) <= arch_number(gpu.arch) and (need is None or gpu.driver >= need):
            return True
    return False


def problem(code: DeviceCode, gpu: Gpu) -> str | None:
    """Why `gpu` cannot run `code` and how to fix it, or None when it can."""
    if runs_sass(code, gpu) or runs_ptx(code, gpu):
        return None
    where = f"GPU {gpu.index}" + (f" ({gpu.name}, {gpu.arch})" if gpu.name else f" ({gpu.arch})")
    lines = [f"cannot run on {where} with a driver of CUDA {gpu.driver}: the library carries {code.describe()}."]
    usable = [isa for arch, isa in code.ptx if arch_number("sm_" + arch.split("_", 1)[1]) <= arch_number(gpu.arch)]
    needs = [n for n in (cuda_for_ptx_isa(parse_isa(isa)) for isa in usable) if n is not None]
    floor = CudaVersion(gpu.driver.major, 0) if gpu.driver >= MIN_FLOOR else MIN_FLOOR
    fixes = [f"rebuild with SASS for this GPU and a CUDA floor it meets, e.g. "
             f"jitflow.compile(mod, 'cuda', arch=[..., '{gpu.arch}'], cuda_floor='{floor}') "
             f"or arch='portable' (jitflow build --arch {gpu.arch} --cuda-floor {floor})"]
    if needs:
        fixes.append(f"or update the driver to CUDA {min(needs)} or newer")
    if gpu.driver < MIN_FLOOR:
        fixes.append(f"(TVM's CUDA runtime itself needs a driver of CUDA {MIN_FLOOR} or newer; on a data-center "
                     "GPU NVIDIA's forward-compatibility package cuda-compat-13-x provides one)")
    return " ".join(lines + ["Fix: " + " ".join(fixes)])


def check_library(path: str | os.PathLike, query: DeviceQuery | None = None, index: int = 0,
                  recorded: Any = None) -> None:
    """Raise LoadError when GPU `index` (as `query` sees it) cannot run the library's kernels, those
    its fatbins carry, or when its digest record states other device code than they carry
    (`recorded`, the record's "cuda" field: a statement is never believed on its own word; one in a
    form this reader does not know is left aside). A fatbin that cannot be read is a LoadError too."""
    gpu = (query or DriverQuery()).gpu(index)
    if gpu is None:
        return
    try:
        code = device_code(path)
    except JitflowError as exc:
        raise LoadError(f"{os.fspath(path)}: its device code cannot be read ({exc}); build or copy it again") \
            from None
    stated = DeviceCode.from_record(recorded) if recorded is not None else None
    if stated is not None and stated != code:
        carried = "no fatbin" if code is None else code.describe()
        raise LoadError(f"{os.fspath(path)}: its digest record states {stated.describe()}, and the library carries "
                        f"{carried}: the record was not written for these bytes; build or copy it again")
    if code is None:
        return
    reason = problem(code, gpu)
    if reason:
        raise LoadError(f"{os.fspath(path)} {reason}")
