"""Where the CUDA toolkit's programs are: nvcc, ptxas, nvdisasm and cuobjdump, found in this one place.

Every tool is looked for in one order: the toolkit folders the environment names
(config.cuda_toolkit_homes: CUDA_HOME, then CUDA_PATH, each `<home>/bin`), then PATH, then beside
the nvcc found that way (followed through links, as for a /usr/bin/nvcc that points into a
toolkit), then the `bin` folders of NVIDIA's pip wheels (nvidia-cuda-nvdisasm, nvidia-cuda-nvcc).
A tool is looked up once per process and value of those variables.

No toolkit is needed by default: NVRTC and nvfatbin come from pip wheels (nvrtc.py). These tools
serve nvcc when it is asked for (nvcc.py), the PTX check where nvJitLink is missing (ptx_floor.py)
and the report's SASS.
"""
from __future__ import annotations

import glob
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Literal

from ...config import cuda_toolkit_homes
from ...errors import ToolMissingError

Tool = Literal["nvcc", "ptxas", "nvdisasm", "cuobjdump"]
TOOLS: tuple[Tool, ...] = ("nvcc", "ptxas", "nvdisasm", "cuobjdump")
WHERE = "CUDA_HOME, CUDA_PATH, PATH, beside nvcc and NVIDIA's pip wheels"


def where(name: Tool) -> str:
    """Where `name` is looked for, in words (nvcc itself is not looked for beside nvcc)."""
    return "CUDA_HOME, CUDA_PATH, PATH and NVIDIA's pip wheels" if name == "nvcc" else WHERE


def _candidates(name: str, homes: tuple[Path, ...]) -> Iterator[Path]:
    for home in homes:
        yield home / "bin" / name
    on_path = shutil.which(name)
    if on_path:
        yield Path(on_path)
    nvcc = shutil.which("nvcc")
    if nvcc and name != "nvcc":
        yield Path(nvcc).resolve().parent / name
    try:
        import nvidia
    except ImportError:
        return
    for root in getattr(nvidia, "__path__", []):
        yield from (Path(p) for p in sorted(glob.glob(os.path.join(root, "*", "bin", name))))


def find(name: Tool) -> str | None:
    """The path of the CUDA tool `name`, or None where none is installed (see the module's order)."""
    return _find(name, cuda_toolkit_homes(), os.environ.get("PATH", ""))


@lru_cache(maxsize=None)
def _find(name: str, homes: tuple[Path, ...], _path: str) -> str | None:
    """Memoized per tool and environment: CUDA_HOME, CUDA_PATH or PATH changed means a new search."""
    for path in _candidates(name, homes):
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def require(name: Tool, why: str, fix: str) -> str:
    """The path of `name`, or a ToolMissingError saying what needed it, where it was looked for and `fix`."""
    found = find(name)
    if found is None:
        raise ToolMissingError(f"{why} needs {name}, which is not in {where(name)}; {fix}")
    return found
