"""CUDA source -> fatbin with the compiler the user chose (NVRTC by default, or nvcc)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence


def compile_fatbin(source_path: Path, archs: Sequence[str], compiler: str, options: Sequence[str] = (),
                   on_arch: Callable[[str, float], None] | None = None) -> tuple[bytes, str]:
    """Fatbin with SASS for every arch and PTX for the lowest, plus the compiler's log."""
    if compiler == "nvcc":
        import time

        from . import nvcc

        start = time.perf_counter()
        data, log = nvcc.compile_fatbin(source_path, archs, options)
        if on_arch:
            on_arch("+".join(archs), time.perf_counter() - start)
        return data, log
    from . import nvrtc

    return nvrtc.compile_fatbin(source_path.read_text(), archs, options, source_path, on_arch)
