"""Several builds' host C compiled by one clang compiler proper process (`zig -cc1`), each file its
own translation unit and its own object.

clang's compiler proper takes any number of inputs: without `-o` it compiles them one after
another and writes each object beside its source (`d/host_0.c` -> `d/host_0.o`), each through a
temporary file (`host_0-<random>.o.tmp`) renamed once it is complete. zig's clang driver would
start one process per input, so the command is the compiler proper's (zig.py's probe), run in a
folder of links to each build's folder. Each build's command is the same as its solo one but for where it runs, which with `-g0`
changes no byte of the object; `__FILE__` of each input is mapped back to its solo name.

The objects appear in input order, so the one being compiled is the first one missing. A build's
time limit holds for its own file: what its deadline had left when it asked (the caller pauses it
while the batch runs) counts from the moment the process reaches that file, so the files ahead
are not charged to it; past it the process is killed, that build fails with BuildTimeoutError and
the files after it go on in a new process. Each request records the seconds its own file took
(`own_s`), which the caller charges to its deadline. A file that takes longer than
PATIENCE_S, or that fails to compile, is given back to be compiled alone (its error, then, is the
one a solo build gives); the others again go on without it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ...errors import BuildTimeoutError
from . import zig, zig_direct
from ..deadline import Deadline

#: seconds one file may hold up the files after it in a shared process; then it goes on alone
PATIENCE_S = 2.0
#: how often the running process's objects are looked for
POLL_S = 0.002
#: what a request ends as: its object is made, it ran past its limit, or it is to be compiled alone
BUILT, TIMED_OUT, ALONE = "built", "timed out", "alone"
_CWD = "\0cwd"


@dataclass
class Request:
    """One build's host C compile: the compiler proper's command for it alone (run in `cwd`, writing
    `out` from `source`), the words it shares with others (its `template`) and its deadline."""

    source: Path
    out: Path
    argv: list[str]
    template: tuple[str, ...]
    env: dict[str, str]
    deadline: Deadline | None = None
    outcome: str = ""
    log: str = ""
    #: seconds a shared process spent on this request's own file (its own work, charged to its deadline)
    own_s: float = 0.0
    #: processes this request was part of (the tests' and benchmarks' view of the batching)
    processes: list[int] = field(default_factory=list)

    @property
    def cwd(self) -> Path:
        return self.out.parent

    @property
    def relative(self) -> str:
        return os.path.relpath(self.source, self.cwd)

    def made(self) -> Path:
        """Where the shared process writes this object (beside the source)."""
        return self.cwd / Path(self.relative).with_suffix(".o")


def request(source: Path, out: Path, include_dirs: Sequence[str], host: str, zig_cache: Path,
            cpu: str | None = None, deadline: Deadline | None = None) -> Request | None:
    """The request for compiling `source` into `out` as zig.compile_object would (no extra flags),
    or None where no compiler proper command is known (zig cc then compiles it alone)."""
    includes = tuple(f"-I{d}" for d in include_dirs)
    probe = zig.within(deadline, zig._compile_probe, host, includes, str(zig_cache), cpu, ())
    runs = probe.compiler_proper() if probe else None
    cwd = str(out.parent)
    relative = os.path.relpath(source, cwd)
    if runs is None or _CWD in cwd or relative.startswith(".."):
        return None
    argv = runs.instantiate(cwd, {zig_direct.SOURCE: [relative], zig_direct.OBJECT: [out.name]})
    header = zig._header(probe, source, zig_cache, make_now=True, deadline=deadline) if argv else None   # a batch
    if argv is None or header is None or argv.count("-o") != 1 or argv[-1] != relative \
            or argv[argv.index("-o") + 1] != out.name:
        return None
    argv = [*argv[:2], "-include-pch", str(header), *argv[2:]]
    at = argv.index("-o")
    shared = [*argv[:at], *argv[at + 2:-1]]
    template = tuple(w.replace(cwd, _CWD) for w in shared)
    if any(cwd in w for w in template):
        return None
    return Request(source, out, argv, template, zig._env(zig_cache, zig_cache), deadline)


def compile_all(requests: Sequence[Request], settled: Callable[[Request], None] = lambda r: None) -> None:
    """Compile every request, those of one template in shared processes; sets each one's outcome
    (and log, for one that timed out) and tells `settled` as soon as it is known."""
    groups: dict[tuple[str, ...], list[Request]] = {}
    for r in requests:
        groups.setdefault(r.template, []).append(r)
    for group in groups.values():
        todo = list(group)
        while todo:
            try:
                todo = _one_process(todo, settled)
            except OSError:               # no process to share (or its folder): each goes on alone
                for r in todo:
                    if not r.outcome:
                        r.outcome = ALONE
                        settled(r)
                todo = []


def _one_process(group: list[Request], settled: Callable[[Request], None]) -> list[Request]:
    """Run one compiler process over `group` (in order); returns the requests still to compile."""
    if len(group) == 1:
        group[0].outcome = ALONE          # a process of its own: the solo path, with zig cc's fallback
        settled(group[0])
        return []
    folder = Path(tempfile.mkdtemp(prefix="jitflow-batch-"))
    try:
        for k, r in enumerate(group):
            os.symlink(r.cwd, folder / str(k))
            r.made().unlink(missing_ok=True)
        words = [w.replace(_CWD, str(folder)) for w in group[0].template]
        maps = [f"-fmacro-prefix-map={k}/=" for k in range(len(group))]
        inputs = [f"{k}/{r.relative}" for k, r in enumerate(group)]
        log_path = folder / "log"
        with open(log_path, "w+") as log:
            proc = subprocess.Popen([*words[:2], *maps, *words[2:], *inputs], cwd=folder, env=group[0].env,
                                    stdout=log, stderr=subprocess.STDOUT)
            current, stopped = _watch(proc, group)
            log.seek(0)
            text = log.read()
        for r in group[:current + (stopped is not None)]:
            r.processes.append(proc.pid)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for r in group[:current]:
        r.outcome = BUILT
        if r.made() != r.out:
            os.replace(r.made(), r.out)
        settled(r)
    if current == len(group):
        return []
    failing = group[current]
    _remove_partial(failing)
    for r in group[current + 1:]:
        r.made().unlink(missing_ok=True)
    if stopped == TIMED_OUT:
        failing.outcome, failing.log = TIMED_OUT, text
    else:                                 # too slow to share a process, or it failed: alone, from the start
        failing.outcome = ALONE
    settled(failing)
    return group[current + 1:]


def _watch(proc: subprocess.Popen, group: list[Request]) -> tuple[int, str | None]:
    """Wait for `proc`, following which input it compiles; returns how many objects it made and why
    it was stopped (TIMED_OUT, ALONE) or None if it ended by itself."""
    current, started = 0, time.monotonic()
    budget = _budget(group[0])
    while True:
        ended = proc.poll() is not None
        while current < len(group) and group[current].made().exists():
            now = time.monotonic()
            group[current].own_s += now - started
            current, started = current + 1, now
            budget = _budget(group[current]) if current < len(group) else None
        if ended or current == len(group):
            proc.wait()
            if current < len(group):
                group[current].own_s += time.monotonic() - started
            return current, None
        if budget is not None and time.monotonic() - started >= budget:
            stopped = TIMED_OUT
        elif current < len(group) - 1 and time.monotonic() - started > PATIENCE_S:   # others wait
            stopped = ALONE
        else:
            time.sleep(POLL_S)
            continue
        proc.kill()
        proc.wait()
        group[current].own_s += time.monotonic() - started
        return current, stopped


def _budget(r: Request) -> float | None:
    """Seconds `r`'s own file may take from the moment the process reaches it (None: no limit)."""
    return None if r.deadline is None else r.deadline.left()


def _remove_partial(r: Request) -> None:
    """A killed process's temporary object of `r` (clang writes `host_0-<random>.o.tmp`)."""
    made = r.made()
    for leftover in made.parent.glob(f"{made.stem}-*{made.suffix}.tmp"):
        leftover.unlink(missing_ok=True)


def timeout_error(r: Request) -> BuildTimeoutError:
    """The error of a request that ran past its deadline in a shared process."""
    assert r.deadline is not None
    return BuildTimeoutError("zig -cc1", r.argv, r.log, r.source, r.deadline.limit)
