"""CUDA archs: the spellings jitflow accepts, their order, and the GPU this machine has.

An arch is written sm_XY, with an `a` or `f` suffix for arch-specific features (sm_90a). These
spellings are read as the same arch, everywhere an arch is taken (arch=, a target's "arch",
--arch, rep.ptx[...]) and so give the same cache key: any case (SM_90), the bare number (90,
"90") or capability ("9.0"), and compute_90. A build holds SASS for every arch and PTX for the
lowest, so compute_90 (a virtual arch, PTX only) gets the sm_90 library, which is a superset of
it. Anything else (sm90, hopper, sm_9O) is a TargetError that shows the form. Whether the installed
compiler builds an arch is its own list's business (toolchain/cuda.py: check_archs, before a build).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from ..errors import TargetError

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")


def normalize_arch(arch: Any) -> str:
    """'sm_90', 'SM_90', '90', 90, '9.0', 'compute_90' -> 'sm_90' ('sm_90a' stays); else a TargetError."""
    text = str(arch).strip().lower()
    if re.fullmatch(r"\d\.\d", text):
        text = text.replace(".", "")
    if re.fullmatch(r"\d{2,3}[af]?", text):
        text = "sm_" + text
    if text.startswith("compute_"):
        text = "sm_" + text[len("compute_"):]
    if not _ARCH_RE.match(text):
        raise TargetError(
            f"invalid CUDA arch {arch!r}: expected the form sm_XY such as 'sm_80', 'sm_90' or 'sm_90a'"
            + (" (is there a letter O where a zero belongs?)" if "o" in text[3:] else ""))
    return text


def arch_number(arch: str) -> int:
    """90 for 'sm_90' or 'sm_90a'; a TargetError for what is not an arch in that form."""
    found = _ARCH_RE.match(arch) if isinstance(arch, str) else None
    if found is None:
        raise TargetError(f"invalid CUDA arch {arch!r}: expected the form sm_XY such as 'sm_90'")
    return int(found.group(1))


def normalize_archs(arch: Any) -> tuple[str, ...]:
    """One arch or a list of them (normalize_arch each), sorted, each once; a TargetError for what is
    neither (None, a dict, a number that is not whole)."""
    if isinstance(arch, (str, int)) and not isinstance(arch, bool):
        items: Iterable[Any] = [arch]
    elif isinstance(arch, (list, tuple, set, frozenset)):
        items = arch
    else:
        raise TargetError(f"the CUDA arch must be text such as 'sm_90', or a list of such, not "
                          f"{type(arch).__name__} {str(arch)[:40]}")
    archs = sorted({normalize_arch(a) for a in items}, key=lambda a: (arch_number(a), a))
    if not archs:
        raise TargetError("the list of CUDA archs is empty; give at least one, such as 'sm_90'")
    return tuple(archs)


def visible_gpu_arch() -> str | None:
    """The arch of the first visible GPU, or None where there is no driver or no device."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, dev = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        attr = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        err2, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        if err != driver.CUresult.CUDA_SUCCESS or err2 != driver.CUresult.CUDA_SUCCESS:
            return None
        return f"sm_{major}{minor}"
    except Exception:  # a broken driver install must not break target resolution
        return None


#: arch="portable": SASS for each GPU generation the compiler supports, PTX for the oldest.
PORTABLE = "portable"


def is_portable(arch: Any) -> bool:
    """Whether arch= asks for the portable preset ('portable', or a list holding only it)."""
    if isinstance(arch, str):
        return arch.strip().lower() == PORTABLE
    return isinstance(arch, (list, tuple)) and len(arch) == 1 and is_portable(arch[0])


def portable_archs(supported: Iterable[str]) -> tuple[str, ...]:
    """The lowest arch of each major compute capability among `supported` (the compiler's SASS archs,
    without the 'a'/'f' variants): SASS of sm_X0 runs on every sm_XY GPU of that generation."""
    lowest: dict[int, str] = {}
    for arch in supported:
        m = _ARCH_RE.match(arch)
        if not m or m.group(2):
            continue
        number = int(m.group(1))
        major = number // 10
        if major not in lowest or number < arch_number(lowest[major]):
            lowest[major] = arch
    return tuple(lowest[k] for k in sorted(lowest))
