"""Every setting of jitflow in one place: explicit arguments, then JITFLOW_* variables, then defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidInputError

CUDA_COMPILERS = ("nvrtc", "nvcc")

#: name -> (default, meaning); README's settings table is written from this.
ENVIRONMENT = {
    "JITFLOW_CACHE_DIR": ("the user cache directory (platformdirs)", "where built libraries are kept"),
    "JITFLOW_CACHE": ("1", "0 disables the disk cache (every jit() builds in a temporary folder)"),
    "JITFLOW_CUDA_COMPILER": ("nvrtc", "device compiler: nvrtc (pip wheels) or nvcc (CUDA toolkit)"),
    "JITFLOW_LOG": ("warning", "log level of the 'jitflow' logger: warning, info or debug"),
    "JITFLOW_ZIG_CACHE_DIR": ("<cache dir>/zig", "zig's own cache (libc stubs, objects)"),
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def default_cache_dir() -> Path:
    """The per-user cache directory that platformdirs chooses for jitflow."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("jitflow", appauthor=False))


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidInputError(f"{name}={raw!r} is not a boolean; use 1 or 0")


@dataclass(frozen=True)
class Settings:
    """The resolved configuration of one build."""

    cache_dir: Path
    cache_enabled: bool
    cuda_compiler: str
    zig_cache_dir: Path


def resolve(cache_dir: str | os.PathLike | None = None, cache: bool | None = None,
            cuda_compiler: str | None = None) -> Settings:
    """Resolve settings: explicit arguments win over JITFLOW_* variables, which win over defaults."""
    if cache_dir is None:
        env_dir = os.environ.get("JITFLOW_CACHE_DIR", "").strip()
        directory = Path(env_dir) if env_dir else default_cache_dir()
    else:
        directory = Path(cache_dir)
    enabled = _env_bool("JITFLOW_CACHE", True) if cache is None else bool(cache)
    compiler = (cuda_compiler or os.environ.get("JITFLOW_CUDA_COMPILER", "") or "nvrtc").strip().lower()
    if compiler not in CUDA_COMPILERS:
        raise InvalidInputError(
            f"unknown CUDA compiler {compiler!r}; choose one of {', '.join(CUDA_COMPILERS)} "
            "(argument cuda_compiler= or JITFLOW_CUDA_COMPILER)")
    directory = directory.expanduser().absolute()
    zig_env = os.environ.get("JITFLOW_ZIG_CACHE_DIR", "").strip()
    zig_dir = Path(zig_env).expanduser().absolute() if zig_env else directory / "zig"
    return Settings(cache_dir=directory, cache_enabled=enabled, cuda_compiler=compiler, zig_cache_dir=zig_dir)
