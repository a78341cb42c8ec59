"""The CUDA floor: the oldest driver, named by its CUDA version, that a library promises to load on.

A driver JIT-compiles PTX only up to the PTX ISA of its own CUDA version, and runs SASS built by
a compiler of its own CUDA major version (NVIDIA's minor version compatibility). The floor thus
decides the PTX ISA a library may carry (`ptx_isa_for`) and, back from a fatbin, the driver a
PTX ISA needs (`cuda_for_ptx_isa`).
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..errors import TargetError


class CudaVersion(NamedTuple):
    """A CUDA version such as 13.0, as a driver reports it (cuDriverGetVersion: 13000) or a user writes
    it; ordered as (major, minor)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def from_driver(cls, value: int) -> "CudaVersion":
        """cuDriverGetVersion's integer (1000 * major + 10 * minor) -> CudaVersion."""
        return cls(value // 1000, (value % 1000) // 10)


#: The oldest floor jitflow builds for: TVM's CUDA backend (libtvm_runtime_cuda.so of apache-tvm
#: 0.27) links libcudart.so.13, which needs a driver of CUDA 13.0 (R580) or newer.
MIN_FLOOR = CudaVersion(13, 0)
_TOO_LOW = ("TVM's CUDA runtime backend (libtvm_runtime_cuda.so) links the CUDA 13 runtime, which needs a "
            "driver of CUDA 13.0 (R580) or newer, so no library loaded by it can run on an older driver; "
            "on a CUDA 12 driver (R535, R550, R570) of a data-center GPU, install NVIDIA's forward-"
            "compatibility package cuda-compat-13-0 (or newer) and build with cuda_floor='13.0'. "
            "See docs/shipping.md")

#: CUDA 12 releases and the PTX ISA their drivers JIT (from NVIDIA's PTX ISA release history);
#: from CUDA 13.0 on, CUDA 13.m pairs with PTX ISA 9.m.
_CUDA12_PTX = {0: (8, 0), 1: (8, 1), 2: (8, 2), 3: (8, 3), 4: (8, 4), 5: (8, 5), 6: (8, 5), 8: (8, 7), 9: (8, 8)}


def parse(value: Any, what: str = "cuda_floor") -> CudaVersion:
    """'13.0', '13', 13, 13.0 or a CudaVersion -> CudaVersion; anything else is a TargetError."""
    if isinstance(value, CudaVersion):
        return value
    text = str(value).strip()
    m = re.fullmatch(r"(\d{1,2})(?:\.(\d))?", text)
    if isinstance(value, bool) or not m:
        raise TargetError(f"{what} {value!r} is not a CUDA version; write it as MAJOR.MINOR, e.g. '13.0'")
    return CudaVersion(int(m.group(1)), int(m.group(2) or 0))


def check_supported(floor: CudaVersion) -> CudaVersion:
    """The floor itself, or a TargetError saying why a floor below MIN_FLOOR cannot be kept."""
    if floor < MIN_FLOOR:
        raise TargetError(f"cuda_floor {floor} is below {MIN_FLOOR}: {_TOO_LOW}")
    return floor


def ptx_isa_for(cuda: CudaVersion) -> tuple[int, int]:
    """The newest PTX ISA a driver of CUDA `cuda` can JIT-compile."""
    if cuda.major >= 13:
        return (cuda.major - 4, cuda.minor)
    if cuda.major == 12:
        return _CUDA12_PTX.get(cuda.minor) or max(v for k, v in _CUDA12_PTX.items() if k <= cuda.minor)
    raise TargetError(f"CUDA {cuda} is older than any driver jitflow knows the PTX ISA of (12.0)")


def cuda_for_ptx_isa(isa: tuple[int, int]) -> CudaVersion | None:
    """The oldest driver (CUDA version) that JIT-compiles PTX of ISA `isa`; None for an ISA older than
    PTX 8.0, which every driver jitflow builds for JIT-compiles."""
    major, minor = isa
    if major >= 9:
        return CudaVersion(major + 4, minor)
    if major == 8:
        found = [k for k, v in _CUDA12_PTX.items() if v >= isa]
        return CudaVersion(12, min(found)) if found else None
    return None


def isa_text(isa: tuple[int, int]) -> str:
    return f"{isa[0]}.{isa[1]}"


def parse_isa(text: str) -> tuple[int, int]:
    """'9.0' -> (9, 0)."""
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)
