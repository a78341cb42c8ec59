"""The C toolchain: the zig cc bundled in the `ziglang` wheel (no system compiler, no LLVM install).

A compile runs zig's clang (`zig clang ...`) directly, with the command zig cc runs for it: zig is
asked once per process (it prints the command with ZIG_VERBOSE_CC=1 while compiling a probe file),
and the command is reused with the file names of each compile, less zig's dependency file. That
skips zig cc's own process and its cache bookkeeping, some 8 ms of CPU per file (a sweep compiles
one file per candidate), and gives the same object bytes; if the direct compile fails, the file is
compiled again through zig cc, whose result stands.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..errors import CompileError, ToolMissingError
from . import dist_info, environment

#: zig target triples for each supported host; the glibc suffix is the manylinux2014 baseline.
#: zig picks the architecture's baseline CPU (x86-64, armv8-a) for an explicit -target, never the
#: build machine's, so a library runs on any CPU of its architecture.
ZIG_TARGETS = {"x86_64-linux-gnu": "x86_64-linux-gnu.2.17",
               "aarch64-linux-gnu": "aarch64-linux-gnu.2.17"}
_FLAGS = ["-O2", "-fPIC", "-fno-sanitize=all", "-fno-stack-protector", "-g0",
          # no unwind tables: nothing unwinds through TVM's C (errors are return codes), and writing
          # them costs clang about an eighth of its time on a model's host C
          "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
          "-Xclang", "-ffloat16-excess-precision=none",   # float16 ops round each result, as TIR means
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
    its objects go away with it). `direct`, when given, is the command to run first in place of
    `zig <tool> ARGS` (which then runs only if it fails).
    """

    def __init__(self, args: Sequence[str], cwd: Path, zig_cache: Path, source: Path | None = None,
                 local_cache: Path | None = None, tool: str = "cc", direct: Sequence[str] | None = None) -> None:
        self.command = [zig_binary(), tool, *args]
        self.tool = f"zig {tool}"
        self.source = source
        self._cwd, self._env = cwd, _env(zig_cache, local_cache or zig_cache)
        self._fallback = self.command if direct else None
        self.proc = self._start(list(direct) if direct else self.command)

    def _start(self, command: list[str]) -> subprocess.Popen:
        try:
            return subprocess.Popen(command, cwd=self._cwd, env=self._env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            raise CompileError(self.tool, command, str(exc), self.source) from None

    def wait(self) -> str:
        """Wait for zig; raise CompileError with the command and log on failure."""
        out, _ = self.proc.communicate()
        if self.proc.returncode != 0 and self._fallback and self.proc.returncode > 0:   # not killed
            self._fallback, self.proc = None, self._start(self._fallback)
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


def flags(host: str, cwd: Path) -> list[str]:
    return ["-target", ZIG_TARGETS[host], *[f.format(cwd=cwd) for f in _FLAGS]]


def compile_object(source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
                   local_cache: Path | None = None) -> Job:
    """Start compiling C source -> position-independent object file; call .wait() on the result."""
    cwd = out.parent
    relative = os.path.relpath(source, cwd)
    direct = None
    probe = _clang_command(host, tuple(include_dirs), str(zig_cache))
    if probe is not None:
        direct = _for_file(probe, str(cwd), relative, out.name)
    return Job([*flags(host, cwd), *[f"-I{d}" for d in include_dirs], "-c", relative, "-o", out.name],
               cwd=cwd, zig_cache=zig_cache, source=source, local_cache=local_cache, direct=direct)


_PROBE = "jitflow_probe"


@lru_cache(maxsize=16)
def _clang_command(host: str, include_dirs: tuple[str, ...], zig_cache: str) -> tuple[str, tuple[str, ...]] | None:
    """(the probe's folder, the `zig clang` command zig cc ran to compile a probe file there), or
    None when zig does not say plainly (then every compile goes through zig cc)."""
    if any(any(c.isspace() for c in d) for d in include_dirs):
        return None                        # zig prints the command without quoting
    with tempfile.TemporaryDirectory(prefix="jitflow-probe-") as folder, \
            tempfile.TemporaryDirectory(prefix="jitflow-probe-cache-") as local_cache:
        (Path(folder) / f"{_PROBE}.c").write_text("int jitflow_probe;\n")
        local = Path(local_cache)
        args = [*flags(host, Path(folder)), *[f"-I{d}" for d in include_dirs], "-c", f"{_PROBE}.c", "-o", f"{_PROBE}.o"]
        try:
            proc = subprocess.run([zig_binary(), "cc", *args], cwd=folder,
                                  env=dict(_env(Path(zig_cache), local), ZIG_VERBOSE_CC="1"),
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
    lines = [ln.split(" ") for ln in proc.stderr.splitlines() if ln.startswith(f"{zig_binary()} clang ")]
    if proc.returncode != 0 or len(lines) != 1 or any(c.isspace() for c in folder):
        return None
    command = lines[0]
    dropped: list[str] = []
    out: list[str] = []
    words = iter(command)
    for word in words:
        if word in ("-MD", "-MV"):
            continue
        if word == "-MF":
            dropped.append(next(words, ""))
            continue
        out.append(word)
    if out[2] != f"{_PROBE}.c" or out[-2] != "-o" or not out[-1].startswith(str(local)):
        return None
    out[-1] = f"{_PROBE}.o"
    if any(str(local) in word for word in out) or len(dropped) != 1:
        return None
    return folder, tuple(out)


def _for_file(probe: tuple[str, tuple[str, ...]], cwd: str, source: str, out: str) -> list[str] | None:
    """The probe's command for compiling `source` (relative to `cwd`) into `out`; None if it cannot be."""
    folder, command = probe
    if any(c.isspace() for c in cwd + source + out):
        return None
    names = {f"{_PROBE}.c": source, f"{_PROBE}.o": out}
    argv = [names.get(arg, arg.replace(folder, cwd)) for arg in command]
    if any(_PROBE in arg for arg in argv):
        return None
    return argv
