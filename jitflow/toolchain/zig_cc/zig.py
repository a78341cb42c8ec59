"""The C toolchain: the zig cc bundled in the `ziglang` wheel (no system compiler, no LLVM install).

Compiles and links run the command zig cc would run (`zig clang ...`, `zig ld.lld ...`; for a
compile, the compiler proper `zig -cc1 ...` that clang's driver runs), asked for once per process
(zig_direct.py): some 14 ms of CPU less per small library, which a tuning sweep builds by the
hundred. If a direct command fails, zig cc runs the same step, and its result stands. The
commands are kept in zig's cache folder (probe_memo.py): a new process asks zig for them only once
per machine, and two threads that need the same one wait for one answer.
"""
from __future__ import annotations

import functools
import os
import subprocess
import threading
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from ...errors import BuildTimeoutError, CompileError
from .. import environment
from . import probe_memo, zig_direct, zig_pch, zig_wheel
from ..deadline import Deadline
from .zig_wheel import zig_binary

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
          # TIR's math never reads errno, and TVM's LLVM lowers sqrt and the rest as pure functions: with
          # errno kept, clang could not vectorize a loop of sqrtf (3x slower than LLVM's build of it)
          "-fno-math-errno",
          # LLVM's -O3 (TVM's LLVM host) takes a condition that does not change in a loop out of it, the
          # loop copied for each outcome; -O2 only where nothing is copied. A tuned conv2d's padding test
          # on the inner loop of its tile: 1.7x-2.1x LLVM's time without, 1.26x-1.29x with it
          "-mllvm", "-enable-nontrivial-unswitch",
          "-ffile-prefix-map={cwd}=.", "-Wno-everything"]


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
    `zig <tool> ARGS` (which then runs only if it fails; `direct_wrong()` is called when zig cc then
    succeeds: the direct command, or the header it used, was wrong).
    """

    def __init__(self, args: Sequence[str], cwd: Path, zig_cache: Path, source: Path | None = None,
                 local_cache: Path | None = None, tool: str = "cc", direct: Sequence[str] | None = None,
                 direct_wrong: Callable[[], None] | None = None) -> None:
        self.command = [zig_binary(), tool, *args]
        self.tool = f"zig {tool}"
        self.source = source
        self._cwd, self._env = cwd, _env(zig_cache, local_cache or zig_cache)
        self._fallback = self.command if direct else None
        self._direct_wrong = direct_wrong
        self.proc = self._start(list(direct) if direct else self.command)

    def _start(self, command: list[str]) -> subprocess.Popen:
        try:
            return subprocess.Popen(command, cwd=self._cwd, env=self._env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            raise CompileError(self.tool, command, str(exc), self.source) from None

    def wait(self, deadline: Deadline | None = None) -> str:
        """Wait for zig; raise CompileError with the command and log on failure, BuildTimeoutError
        (zig killed) if it runs past `deadline`."""
        out = self._communicate(deadline)
        if self.proc.returncode != 0 and self._fallback and self.proc.returncode > 0:   # not killed
            self._fallback, self.proc = None, self._start(self._fallback)
            out = self._communicate(deadline)
            if self.proc.returncode == 0 and self._direct_wrong is not None:
                self._direct_wrong()
        if self.proc.returncode != 0:
            raise CompileError(self.tool, self.command, out, self.source)
        return out

    def _communicate(self, deadline: Deadline | None) -> str:
        if deadline is None:
            return self.proc.communicate()[0]
        try:
            return self.proc.communicate(timeout=deadline.left())[0]
        except subprocess.TimeoutExpired:
            self.kill()
            out = self.proc.communicate()[0]
            raise BuildTimeoutError(self.tool, self.proc.args, out or "", self.source, deadline.limit) from None

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


def flags(host: str, cwd: Path, cpu: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """zig cc's flags for `host`; `cpu` is zig's -mcpu (a model or level, with +feature/-feature:
    targets/cpu_level.py), None for the architecture's baseline; `extra` come last."""
    return ["-target", ZIG_TARGETS[host], *([f"-mcpu={cpu}"] if cpu else []), *[f.format(cwd=cwd) for f in _FLAGS],
            *extra]


def compile_object(source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
                   local_cache: Path | None = None, cpu: str | None = None, extra: Sequence[str] = (),
                   deadline: Deadline | None = None) -> Job:
    """Start compiling C source -> position-independent object file for zig's CPU `cpu` (None: the
    baseline), with `extra` flags after jitflow's own; call .wait() on the result. What it waits for
    first (a precompiled header being made) ends at `deadline` too."""
    cwd = out.parent
    relative = os.path.relpath(source, cwd)
    includes = tuple(f"-I{d}" for d in include_dirs)
    probe = within(deadline, _compile_probe, host, includes, str(zig_cache), cpu, tuple(extra))
    runs = (probe.compiler_proper() or probe) if probe else None     # clang's compiler proper, if known
    direct = runs.instantiate(str(cwd), {zig_direct.SOURCE: [relative], zig_direct.OBJECT: [out.name]}) \
        if runs else None
    header = _header(probe, source, zig_cache, deadline=deadline) if direct else None
    if header is not None:
        direct = [*direct[:2], "-include-pch", str(header), *direct[2:]]
    memo = _memo(_compile_request(host, includes, cpu, tuple(extra)))

    def wrong() -> None:
        """zig cc compiled what the direct command could not: the header or the command is at fault
        (a source that fails both ways is the source's fault, and other processes' header stays)."""
        if header is not None:
            zig_pch.discard(header)
        _forget(zig_cache, memo, _compile_probe)

    return Job([*flags(host, cwd, cpu, extra), *includes, "-c", relative, "-o", out.name],
               cwd=cwd, zig_cache=zig_cache, source=source, local_cache=local_cache, direct=direct,
               direct_wrong=wrong if direct else None)


def prepare_compile(host: str, include_dirs: Sequence[str], zig_cache: Path, cpu: str | None = None) -> None:
    """Ask zig now for the command compile_object will run (a build calls it while TVM lowers)."""
    _compile_probe(host, tuple(f"-I{d}" for d in include_dirs), str(zig_cache), cpu, ())


def _header(probe: zig_direct.Probe | None, source: Path, zig_cache: Path, make_now: bool = False,
            deadline: Deadline | None = None) -> Path | None:
    """The precompiled header of the directives `source` starts with (zig_pch.py), or None."""
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            directives = zig_pch.leading_directives(f.read(8192))
    except OSError:
        return None
    if probe is None or directives is None:
        return None
    return zig_pch.header_for(probe, directives, zig_cache, _env(zig_cache, zig_cache), make_now, deadline)


def link(before: Sequence[str], inputs: Sequence[str], after: Sequence[str], out: str, host: str, cwd: Path,
         zig_cache: Path, local_cache: Path | None = None, deadline: Deadline | None = None) -> str:
    """Run `zig cc FLAGS BEFORE INPUTS AFTER -o OUT` in cwd (its linker directly, as zig would run it)."""
    probe = within(deadline, _link_probe, host, tuple(before), tuple(after), str(zig_cache))
    direct = probe.instantiate(str(cwd), {zig_direct.OBJECT: list(inputs), zig_direct.LIBRARY: [out]}) \
        if probe else None
    memo = _memo(_link_request(host, tuple(before), tuple(after)))
    return Job([*flags(host, cwd), *before, *inputs, *after, "-o", out], cwd, zig_cache,
               local_cache=local_cache, direct=direct,
               direct_wrong=(lambda: _forget(zig_cache, memo, _link_probe)) if direct else None).wait(deadline)


def prepare_link(before: Sequence[str], after: Sequence[str], host: str, zig_cache: Path) -> None:
    """Ask zig now for the command link() will run with these flags."""
    _link_probe(host, tuple(before), tuple(after), str(zig_cache))


def within(deadline: Deadline | None, probe: Callable[..., zig_direct.Probe | None],
           *args: object) -> zig_direct.Probe | None:
    """`probe(*args)`, or None if it is not known within half the time `deadline` leaves (the build
    then runs zig cc, in the other half). Asking zig goes on in the background, and its answer is
    kept for later builds."""
    if deadline is None:
        return probe(*args)
    answer: list[zig_direct.Probe | None] = []
    asking = threading.Thread(target=lambda: answer.append(probe(*args)), daemon=True,
                              name="jitflow-zig-probe")
    asking.start()
    asking.join(deadline.left() / 2)
    return answer[0] if answer else None


def _once(probe: Callable[..., zig_direct.Probe | None]) -> Callable[..., zig_direct.Probe | None]:
    """`probe` asked once per process and set of arguments: threads asking for the same one wait for
    the first (two at once would each run zig for it)."""
    cached = lru_cache(maxsize=16)(probe)
    locks: dict[tuple, threading.Lock] = {}
    guard = threading.Lock()

    @functools.wraps(probe)
    def once(*args: object) -> zig_direct.Probe | None:
        with guard:
            lock = locks.setdefault(args, threading.Lock())
        with lock:
            return cached(*args)

    once.cache_clear = cached.cache_clear        # type: ignore[attr-defined]
    return once


def _remembered(parts: list[str], zig_cache: str,
                ask: Callable[[], zig_direct.Probe | None]) -> zig_direct.Probe | None:
    """The probe kept in zig's cache folder for the request `parts`, else `ask()`'s answer (then kept)."""
    zig = zig_binary()
    memo = _memo(parts)
    if memo is not None:
        kept = probe_memo.read(Path(zig_cache), memo, zig, parts)
        if kept is not None:
            return kept
    probe = ask()
    if probe is not None and memo is not None:
        probe_memo.write(Path(zig_cache), memo, probe, zig, parts)
    return probe


def _forget(zig_cache: Path, memo: str | None, probe: Callable[..., object]) -> None:
    """A direct command failed where zig cc succeeded: ask zig again next time (here and in later processes)."""
    if memo is not None:
        probe_memo.forget(Path(zig_cache), memo)
    probe.cache_clear()        # type: ignore[attr-defined]


def _memo(parts: list[str]) -> str | None:
    return probe_memo.name(zig_binary(), zig_wheel.version(), parts)


def _compile_request(host: str, includes: tuple[str, ...], cpu: str | None, extra: tuple[str, ...]) -> list[str]:
    """What a compile probe is asked with (its memo's name and record)."""
    return ["compile", *flags(host, Path("<folder>"), cpu, extra), *includes]


def _link_request(host: str, before: tuple[str, ...], after: tuple[str, ...]) -> list[str]:
    """What a link probe is asked with (its memo's name and record)."""
    return ["link", *flags(host, Path("<folder>")), *before, "<object>", *after]


@_once
def _compile_probe(host: str, includes: tuple[str, ...], zig_cache: str,
                   cpu: str | None = None, extra: tuple[str, ...] = ()) -> zig_direct.Probe | None:
    if any(any(c.isspace() for c in d) for d in includes):
        return None
    return _remembered(_compile_request(host, includes, cpu, extra), zig_cache, lambda: zig_direct.probe_compile(
        zig_binary(), lambda folder: [*flags(host, folder, cpu, extra), *includes],
        lambda local: _env(Path(zig_cache), local)))


@_once
def _link_probe(host: str, before: tuple[str, ...], after: tuple[str, ...], zig_cache: str) -> zig_direct.Probe | None:
    return _remembered(_link_request(host, before, after), zig_cache, lambda: zig_direct.probe_link(
        zig_binary(), lambda folder: flags(host, folder), before, after,
        lambda local: _env(Path(zig_cache), local)))
