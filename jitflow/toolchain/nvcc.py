"""CUDA source -> fatbin with nvcc from a CUDA toolkit, for users who ask for it."""
from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..config import cuda_toolkit_homes
from ..errors import CompileError, ToolMissingError
from . import environment
from .cuda_flags import CudaFlags


@lru_cache(maxsize=1)
def find_nvcc() -> str:
    """Path of nvcc: $CUDA_HOME/bin, then PATH."""
    for home in cuda_toolkit_homes():
        if (home / "bin" / "nvcc").is_file():
            return str(home / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if not found:
        raise ToolMissingError(
            "nvcc was asked for (JITFLOW_CUDA_COMPILER=nvcc or cuda_compiler='nvcc') but is not on PATH "
            "and CUDA_HOME is not set; install a CUDA toolkit or use the default NVRTC compiler "
            "(pip install 'jitflow[cuda]')")
    return found


@lru_cache(maxsize=1)
def version() -> str:
    """The last line of `nvcc --version` and the host compiler nvcc preprocesses with (its path and
    version: the cache key's record of the device compiler)."""
    out = subprocess.run([find_nvcc(), "--version"], capture_output=True, text=True, check=False,
                         env=environment.for_compiler())
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return "nvcc " + (lines[-1] if lines else "unknown") + "; host " + _host_compiler()


def _host_compiler() -> str:
    gcc = shutil.which("gcc", path=environment.for_compiler().get("PATH"))
    if gcc is None:
        return "none"
    out = subprocess.run([gcc, "-dumpfullversion"], capture_output=True, text=True, check=False,
                         env=environment.for_compiler())
    return f"{gcc} {out.stdout.strip() or 'unknown'}"


def compile_fatbin(source_path: Path, archs: Sequence[str], options: Sequence[str] = (),
                   flags: CudaFlags = CudaFlags()) -> tuple[bytes, str]:
    """Compile the kept source to a fatbin (SASS per arch, PTX for the lowest): (fatbin, log)."""
    out = source_path.with_suffix(".fatbin")
    cmd = [find_nvcc(), "-fatbin", "-std=c++17", "--expt-relaxed-constexpr"]
    for i, arch in enumerate(archs):
        num = arch[len("sm_"):]
        code = f"[sm_{num},compute_{num}]" if i == 0 else f"sm_{num}"
        cmd += ["-gencode", f"arch=compute_{num},code={code}"]
    cmd += [*flags.defines, f"--ptxas-options={','.join(flags.ptxas)}", *options, "-o", str(out), str(source_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=environment.for_compiler())
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or not out.is_file():
        raise CompileError("nvcc", cmd, log, source_path)
    data = out.read_bytes()
    out.unlink()
    return data, log
