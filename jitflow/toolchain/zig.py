"""The C toolchain: the zig cc bundled in the `ziglang` wheel (no system compiler, no LLVM install)."""
from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..errors import CompileError, ToolMissingError
from . import dist_info, environment

#: zig target triples for each supported host; the glibc suffix is the manylinux2014 baseline.
#: zig picks the architecture's baseline CPU (x86-64, armv8-a) for an explicit -target, never the
#: build machine's, so a library runs on any CPU of its architecture unless a CPU level asks for more.
ZIG_TARGETS = {"x86_64-linux-gnu": "x86_64-linux-gnu.2.17",
               "aarch64-linux-gnu": "aarch64-linux-gnu.2.17"}
_FLAGS = ["-O2", "-fPIC", "-fno-sanitize=all", "-fno-stack-protector", "-g0",
          # no unwind tables: nothing unwinds through TVM's C (errors are return codes), and writing
          # them costs clang about an eighth of its time on a model's host C
          "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
          "-Xclang", "-ffloat16-excess-precision=none",   # float16 ops round each result, as TIR means
          # and so do a * b + c: never fused into one FMA where the CPU level (or aarch64) has them. TVM's
          # unscheduled reductions are serial chains, and an FMA's latency (4 cycles on Zen 5, twice an
          # add's) doubled resnet18 at x86-64-v3; results also stay the same at every level
          "-ffp-contract=off",
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
    found = dist_info.version("ziglang", [dist_info.site_of(Path(zig_binary()).parent)])
    if found:
        return found
    proc = subprocess.run([zig_binary(), "version"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ToolMissingError("zig does not run (`zig version` failed); reinstall ziglang")
    return proc.stdout.strip()


def _env(zig_cache: Path, local_cache: Path) -> dict[str, str]:
    env = environment.for_compiler()
    env["ZIG_GLOBAL_CACHE_DIR"] = str(zig_cache)
    env["ZIG_LOCAL_CACHE_DIR"] = str(local_cache)
    return env


class Job:
    """A zig process running in the background (the host compiles while NVRTC works).

    zig_cache is zig's global cache (the per-user toolchain folder, see zig_cache.py); local_cache,
    where zig keeps the objects of this one build, defaults to it (give a build's own folder so that
    its objects go away with it).
    """

    def __init__(self, args: Sequence[str], cwd: Path, zig_cache: Path, source: Path | None = None,
                 local_cache: Path | None = None, tool: str = "cc") -> None:
        self.command = [zig_binary(), tool, *args]
        self.tool = f"zig {tool}"
        self.source = source
        try:
            self.proc = subprocess.Popen(self.command, cwd=cwd, env=_env(zig_cache, local_cache or zig_cache),
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            raise CompileError(self.tool, self.command, str(exc), source) from None

    def wait(self) -> str:
        """Wait for zig; raise CompileError with the command and log on failure."""
        out, _ = self.proc.communicate()
        if self.proc.returncode != 0:
            raise CompileError(self.tool, self.command, out, self.source)
        return out

    def kill(self) -> None:
        """Stop zig (the build failed elsewhere); whoever waits for it gets a CompileError."""
        try:
            self.proc.kill()
        except OSError:
            pass          # it has ended already


def run(args: Sequence[str], cwd: Path, zig_cache: Path, source: Path | None = None,
        local_cache: Path | None = None) -> str:
    """Run `zig cc ARGS` in cwd and wait for it."""
    return Job(args, cwd, zig_cache, source, local_cache).wait()


def run_tool(args: Sequence[str], cwd: Path, zig_cache: Path, local_cache: Path | None = None) -> str:
    """Run another zig sub-command (`zig ar ...`) in cwd and wait for it."""
    return Job(args[1:], cwd, zig_cache, local_cache=local_cache, tool=args[0]).wait()


def flags(host: str, cwd: Path, cpu: str | None = None) -> list[str]:
    """zig cc's flags for `host`; `cpu` is zig's -mcpu (a model or level, with +feature/-feature:
    target/cpu_level.py), None for the architecture's baseline."""
    return ["-target", ZIG_TARGETS[host], *([f"-mcpu={cpu}"] if cpu else []), *[f.format(cwd=cwd) for f in _FLAGS]]


def compile_object(source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
                   local_cache: Path | None = None, cpu: str | None = None) -> Job:
    """Start compiling C source -> position-independent object file for zig's CPU `cpu` (None: the
    baseline); call .wait() on the result."""
    cwd = out.parent
    return Job([*flags(host, cwd, cpu), *[f"-I{d}" for d in include_dirs], "-c", os.path.relpath(source, cwd),
                "-o", out.name], cwd=cwd, zig_cache=zig_cache, source=source, local_cache=local_cache)
