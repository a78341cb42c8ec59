"""Assemble PTX to SASS with nvJitLink from NVIDIA's pip wheel (nvidia-nvjitlink): no CUDA toolkit.

jitflow uses it to prove that PTX is valid at the ISA it declares: ptxas (inside nvJitLink)
refuses any instruction or directive newer than the `.version` of the text.
"""
from __future__ import annotations

from functools import lru_cache

from ...errors import CompileError, ToolMissingError

INSTALL_HINT = "pip install 'jitflow[cuda]' (it brings nvidia-nvjitlink)"


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether nvJitLink can be loaded (its Python bindings and libnvJitLink)."""
    try:
        from cuda.bindings import nvjitlink

        nvjitlink.version()
        return True
    except Exception:  # ImportError, or the library not found by cuda.pathfinder
        return False


def version() -> str:
    from cuda.bindings import nvjitlink

    major, minor = nvjitlink.version()
    return f"{major}.{minor}"


def assemble(ptx: bytes, arch: str, name: str = "kernels.ptx") -> bytes:
    """Compile PTX text for `arch` ('sm_80'); returns the cubin, or raises CompileError with ptxas' log."""
    if not available():
        raise ToolMissingError(f"nvJitLink is not installed or not loadable; {INSTALL_HINT}")
    from cuda.bindings import nvjitlink

    options = [f"-arch={arch}"]
    handle = nvjitlink.create(len(options), options)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                nvjitlink.get_error_log(handle, log)
            text = bytes(log).rstrip(b"\0").decode(errors="replace")
            raise CompileError("nvJitLink", f"nvJitLink -arch={arch} {name}", f"{exc}\n{text}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)
