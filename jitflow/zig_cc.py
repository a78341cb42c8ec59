"""The C toolchain: the zig cc bundled in the `ziglang` wheel (no system compiler, no LLVM install)."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from .errors import CompileError, ToolMissingError

#: zig target triples for each supported host; the glibc suffix is the manylinux2014 baseline.
ZIG_TARGETS = {"x86_64-linux-gnu": "x86_64-linux-gnu.2.17"}
_FLAGS = ["-O2", "-fPIC", "-fno-sanitize=all", "-fno-stack-protector", "-g0",
          "-ffile-prefix-map={cwd}=.", "-Wno-everything"]


@lru_cache(maxsize=1)
def zig_binary() -> str:
    """The zig executable inside the installed ziglang package."""
    try:
        import ziglang
    except ImportError:
        raise ToolMissingError("the ziglang package is not installed; pip install ziglang") from None
    exe = Path(ziglang.__file__).parent / "zig"
    if not exe.is_file():
        raise ToolMissingError(f"the ziglang package has no zig binary at {exe}; reinstall ziglang")
    return str(exe)


@lru_cache(maxsize=1)
def version() -> str:
    """Version of zig (part of the cache key): the wheel's metadata, else `zig version`."""
    try:
        return importlib.metadata.version("ziglang")
    except importlib.metadata.PackageNotFoundError:
        proc = subprocess.run([zig_binary(), "version"], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise ToolMissingError("zig does not run (`zig version` failed); reinstall ziglang") from None
        return proc.stdout.strip()


def _env(zig_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX", "CFLAGS", "LDFLAGS", "CPATH")}
    env["ZIG_GLOBAL_CACHE_DIR"] = str(zig_cache)
    env["ZIG_LOCAL_CACHE_DIR"] = str(zig_cache)
    return env


def run(args: Sequence[str], cwd: Path, zig_cache: Path, source: Path | None = None) -> str:
    """Run `zig cc ARGS` in cwd; raise CompileError with the command and log on failure."""
    zig_cache.mkdir(parents=True, exist_ok=True)
    cmd = [zig_binary(), "cc", *args]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=_env(zig_cache), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CompileError("zig cc", cmd, str(exc), source) from None
    if proc.returncode != 0:
        raise CompileError("zig cc", cmd, proc.stdout + proc.stderr, source)
    return proc.stdout + proc.stderr


def flags(host: str, cwd: Path) -> list[str]:
    return ["-target", ZIG_TARGETS[host], *[f.format(cwd=cwd) for f in _FLAGS]]


def compile_object(source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path) -> None:
    """C source -> position-independent object file."""
    cwd = out.parent
    run([*flags(host, cwd), *[f"-I{d}" for d in include_dirs], "-c", os.path.relpath(source, cwd),
         "-o", out.name], cwd=cwd, zig_cache=zig_cache, source=source)


def link_shared(inputs: Sequence[Path], out: Path, host: str, zig_cache: Path) -> None:
    """Objects and assembly files -> shared library; TVM's symbols resolve when the runtime loads it."""
    cwd = out.parent
    run([*flags(host, cwd), "-shared", "-Wl,--build-id=none", *[str(p.relative_to(cwd)) for p in inputs],
         "-lm", "-o", out.name], cwd=cwd, zig_cache=zig_cache)
