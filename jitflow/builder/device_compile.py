"""Each device module's CUDA source -> fatbins, its kernels compiled in pieces side by side.

With NVRTC and TVM's usual prelude (small enough for the in-memory CCCL headers), a source is split
by kernels (host_c/split.py: split_kernels) into as many pieces as usable cores, which NVRTC compiles in
parallel threads, each for every arch; each piece becomes its own device module (pack.py).
Compiling a piece costs the prelude once more (tens of milliseconds); a source that needs the real
CCCL headers (a second of parsing per compile) or nvcc is compiled whole. If the pieces fail, the
whole source is compiled before any error is reported.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from ..errors import CompileError
from ..targets.cuda_floor import CudaVersion
from ..toolchain.cuda import cccl_shim, device_compiler
from ..toolchain.cuda.cuda_flags import CudaFlags
from .host_c import split
from .host_c.compile import usable_cores
from .pack import DevicePiece

log = logging.getLogger("jitflow")
#: a piece of at least this much CUDA source (TVM's kernels for a model are 10 to 100 KB each)
MIN_PIECE_BYTES = 32_000
MAX_PIECES = 32


def piece_count(source: str, compiler: str, cores: int | None = None) -> int:
    """How many pieces a device source is compiled in (1: whole) on a machine with `cores`."""
    if compiler != "nvrtc" or not cccl_shim.applies(source):
        return 1
    cores = usable_cores() if cores is None else cores
    return max(1, min(MAX_PIECES, cores, -(-len(source) // MIN_PIECE_BYTES)))


class _ArchClock:
    """Calls on_arch(arch, seconds since start) once per arch, when its last piece is done."""

    def __init__(self, archs: Sequence[str], pieces: int, on_arch: Callable[[str, float], None] | None) -> None:
        self.left = dict.fromkeys(archs, pieces)
        self.on_arch = on_arch
        self.start = time.perf_counter()
        self.lock = threading.Lock()

    def done(self, arch: str, _seconds: float) -> None:
        with self.lock:
            self.left[arch] -= 1
            finished = self.left[arch] == 0
        if finished and self.on_arch:
            self.on_arch(arch, time.perf_counter() - self.start)


def compile_device(source_path: Path, archs: Sequence[str], compiler: str, options: Sequence[str] = (),
                   on_arch: Callable[[str, float], None] | None = None, jobs: int | None = None,
                   floor: CudaVersion | None = None, flags: CudaFlags = CudaFlags()) -> tuple[list[DevicePiece], str]:
    """The kept CUDA source at `source_path` -> fatbin pieces and the compiler's log; `jobs` compiles
    at once (default: the usable cores); `floor` and `flags` as for device_compiler.compile_fatbin."""
    source = source_path.read_text()
    jobs = jobs or usable_cores()
    pieces = split.split_kernels(source, piece_count(source, compiler, jobs))
    if len(pieces) > 1:
        clock = _ArchClock(archs, len(pieces), on_arch)
        try:
            with ThreadPoolExecutor(max_workers=min(jobs, len(pieces)),
                                    thread_name_prefix="jitflow-device") as pool:
                built = list(pool.map(lambda p: device_compiler.compile_fatbin(
                    source_path, archs, compiler, options, clock.done, floor, text=p[0], flags=flags), pieces))
            logs = [f"== piece {n}: {', '.join(names)} ==\n{text}" for n, ((_, names), (_, text))
                    in enumerate(zip(pieces, built))]
            return [DevicePiece(fatbin, names) for (_, names), (fatbin, _) in zip(pieces, built)], "\n".join(logs)
        except CompileError as exc:
            log.debug("jitflow: the device code pieces failed (%s); compiling the source whole", exc.log[-500:])
    fatbin, text = device_compiler.compile_fatbin(source_path, archs, compiler, options, on_arch, floor, flags=flags)
    return [DevicePiece(fatbin, [])], text
