"""CUDA source -> fatbin (or PTX, for a report) with nvcc from a CUDA toolkit, for users who ask for it.

nvcc's command line is written here only: `_command` holds the flags every nvcc run gets.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ...errors import CompileError
from . import cuda_toolkit
from .. import environment
from .cuda_flags import CudaFlags


def find_nvcc() -> str:
    """Path of nvcc (cuda_toolkit.py's order), or a ToolMissingError with the fix."""
    return cuda_toolkit.require("nvcc", "cuda_compiler='nvcc' (or JITFLOW_CUDA_COMPILER=nvcc)",
                                "install a CUDA toolkit (or point CUDA_HOME at one), or use the default "
                                "NVRTC compiler (pip install 'jitflow[cuda]')")


def _command(*what: str, options: Sequence[str] = (), flags: CudaFlags = CudaFlags()) -> list[str]:
    """nvcc, `what` it is to make (-fatbin with its -gencode list, -ptx with an -arch), the flags of
    every build (TVM's defines, C++17, as TVM's CUDA variables leave them), then the caller's options."""
    return [find_nvcc(), *what, "-std=c++17", "--expt-relaxed-constexpr", *flags.defines, *options]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, env=environment.for_compiler())


@lru_cache(maxsize=1)
def version() -> str:
    """The last line of `nvcc --version` and the host compiler nvcc preprocesses with (its version:
    the cache key's record of the device compiler; not its path, which differs between machines with
    the same compiler)."""
    out = _run([find_nvcc(), "--version"])
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return "nvcc " + (lines[-1] if lines else "unknown") + "; host " + _host_compiler()


def _host_compiler() -> str:
    gcc = shutil.which("gcc", path=environment.for_compiler().get("PATH"))
    if gcc is None:
        return "none"
    out = _run([gcc, "-dumpfullversion"])
    return f"gcc {out.stdout.strip() or 'unknown'}"


def compile_fatbin(source_path: Path, archs: Sequence[str], options: Sequence[str] = (),
                   flags: CudaFlags = CudaFlags()) -> tuple[bytes, str]:
    """Compile the kept source to a fatbin (SASS per arch, PTX for the lowest): (fatbin, log)."""
    out = source_path.with_suffix(".fatbin")
    gencode = []
    for i, arch in enumerate(archs):
        num = arch[len("sm_"):]
        code = f"[sm_{num},compute_{num}]" if i == 0 else f"sm_{num}"
        gencode += ["-gencode", f"arch=compute_{num},code={code}"]
    cmd = _command("-fatbin", *gencode, options=[f"--ptxas-options={','.join(flags.ptxas)}", *options], flags=flags)
    cmd += ["-o", str(out), str(source_path)]
    proc = _run(cmd)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or not out.is_file():
        raise CompileError("nvcc", cmd, log, source_path)
    data = out.read_bytes()
    out.unlink()
    return data, log


def ptx(source: str, arch: str, options: Sequence[str] = (), flags: CudaFlags = CudaFlags()) -> str:
    """The PTX nvcc makes of `source` for `arch` with a build's options and flags (what ptxas turns into its SASS)."""
    with tempfile.TemporaryDirectory(prefix="jitflow-ptx-") as tmp:
        src, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.ptx"
        src.write_text(source)
        cmd = _command("-ptx", f"-arch=compute_{arch[len('sm_'):]}", options=options, flags=flags) + ["-o", str(out), str(src)]
        proc = _run(cmd)
        if proc.returncode != 0 or not out.is_file():
            raise CompileError("nvcc", cmd, proc.stdout + proc.stderr)
        return out.read_text()


def supported_archs() -> tuple[str, ...]:
    """The SASS archs this nvcc builds ('sm_75', ...)."""
    out = _run([find_nvcc(), "--list-gpu-code"]).stdout
    return tuple(dict.fromkeys(re.findall(r"\bsm_\d+\b", out)))
