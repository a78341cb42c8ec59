"""The measuring processes of jitflow.meta_schedule.Runner, seen from the tuning process: one per
device, started once and kept up between batches, each a fresh Python (measure_worker.py) that sees
its GPU alone.

measure() hands a batch's candidates to the processes of the devices asked for, each taking the
next as it finishes one (with `depth` 2 a GPU process gets the next request early and loads its
library while it times the current one). Every candidate is bounded: past `timeout_s` its process
is killed and replaced, and it fails with that reason. A process that dies (a segfault, an abort)
fails the candidate it was timing, named with how it died and its last words on stderr; a new one
takes its place and the other candidates go on. When a process dies with two candidates in hand,
which one killed it is not known: both are measured again, each alone. A process's start-up is not
charged to any candidate.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .gpus import Gpu

#: seconds a new process may take to import TVM and say it is ready
START_TIMEOUT_S = 300.0
#: starts in a row that may fail on one device before its candidates fail
START_TRIES = 2
#: bytes of a dead process's stderr quoted in its candidate's message
LAST_WORDS = 1500


@dataclass
class Job:
    """One candidate: the request sent, and what came back (costs, or an error)."""

    request: dict[str, Any]
    costs: list[float] | None = None
    error: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    device: str = ""
    alone: bool = False

    @property
    def finished(self) -> bool:
        return self.costs is not None or self.error is not None


class Process:
    """One measuring process on one device (`gpu`, or None: the CPU only)."""

    def __init__(self, gpu: Gpu | None) -> None:
        self.gpu = gpu
        self.label = str(gpu) if gpu else "cpu"
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu.uuid        # this GPU alone, as its device 0
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        self.stderr = tempfile.TemporaryFile(prefix="jitflow-measure-")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jitflow.meta_schedule.measure_worker", str(child_read), str(child_write)],
                pass_fds=(child_read, child_write), env=env, stdin=subprocess.DEVNULL, stdout=self.stderr,
                stderr=self.stderr)
        finally:
            os.close(child_read)
            os.close(child_write)
        self.reader = Connection(parent_read, writable=False)
        self.writer = Connection(parent_write, readable=False)
        self.started = time.monotonic()
        self.ready = False
        self.inflight: deque[Job] = deque()
        self.clock = 0.0              # when the candidate at the head of inflight began to count
        self.words = ""

    def send(self, job: Job, prepare: bool) -> None:
        """Hand `job` to the process (OSError if it is gone: the job is then not its)."""
        self.writer.send_bytes(json.dumps({**job.request, "prepare": prepare}).encode())
        if not self.inflight:
            self.clock = time.monotonic()
        job.device = self.label
        self.inflight.append(job)

    def deadline(self, timeout_s: float) -> float:
        return self.clock + timeout_s if self.ready else self.started + START_TIMEOUT_S

    def last_words(self) -> str:
        """The end of what the process wrote to stderr (a crash's stack from faulthandler)."""
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - LAST_WORDS))
            text = self.stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return ("..." if size > LAST_WORDS else "") + text

    def stop(self, kill: bool = False) -> int | None:
        """End the process (closing its pipe ends it; `kill`: at once); its exit status. What it wrote
        to stderr last is kept in `words`."""
        for conn in (self.writer, self.reader):
            try:
                conn.close()
            except OSError:
                pass
        if kill and self.proc.poll() is None:
            self.proc.kill()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.words = self.last_words()
        self.stderr.close()
        return code


def how_it_died(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"{signal.Signals(-code).name} (signal {-code})"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class Pool:
    """The processes, one per device slot: slot 0 measures CPU candidates (and its GPU's, if any)."""

    def __init__(self, gpus: list[Gpu], timeout_s: float) -> None:
        self.slots: list[Gpu | None] = list(gpus) or [None]
        self.timeout_s = timeout_s
        self.procs: list[Process | None] = [Process(g) for g in self.slots]
        self.failed_starts = [0] * len(self.slots)
        self.counts = {"crashed": 0, "timed out": 0, "replaced": 0, "start wait s": 0.0}
        self.closed = [False] * len(self.slots)     # ended by close(): a later start is no replacement

    def measure(self, jobs: list[Job], slots: list[int], depth: int) -> None:
        """Time every job on the processes of `slots`, `depth` requests at most in each at once."""
        pending = deque(jobs)
        live = list(slots)
        while live and (pending or any(self.procs[s] is not None and self.procs[s].inflight for s in live)):
            procs = {s: self._proc(s) for s in live}
            for proc in procs.values():
                self._feed(proc, pending, depth)
            deadlines = [p.deadline(self.timeout_s) for p in procs.values() if p.inflight or not p.ready]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 1.0
            starting = any(not p.ready for p in procs.values())
            waited = time.monotonic()
            by_reader = {p.reader: s for s, p in procs.items()}
            for conn in wait(list(by_reader), timeout=timeout):
                self._read(by_reader[conn], pending)
            if starting:
                self.counts["start wait s"] += time.monotonic() - waited
            now = time.monotonic()
            for s in list(live):
                proc = self.procs[s]
                if proc is not None and (proc.inflight or not proc.ready) and now >= proc.deadline(self.timeout_s):
                    if proc.ready:
                        self._timed_out(s, pending)
                    else:
                        self._lost(s, f"it did not start within {START_TIMEOUT_S:g} s")
                if self.procs[s] is None and self.failed_starts[s] >= START_TRIES:
                    live.remove(s)
        for job in pending:
            job.error = "no measuring process could be started: " + self.start_failure
        pending.clear()

    start_failure = "(no reason given)"

    def wait_ready(self, slots: list[int]) -> None:
        """Wait until the processes of `slots` are ready (or could not start: measure() then says why)."""
        while True:
            starting = {self._proc(s).reader: s for s in slots
                        if not self._proc(s).ready and self.failed_starts[s] < START_TRIES}
            if not starting:
                return
            soonest = min(self._proc(s).started + START_TIMEOUT_S for s in starting.values())
            for conn in wait(list(starting), timeout=max(0.0, soonest - time.monotonic())):
                self._read(starting[conn], deque())
            for s in starting.values():
                proc = self.procs[s]
                if proc is not None and not proc.ready and time.monotonic() >= proc.deadline(self.timeout_s):
                    self._lost(s, f"it did not start within {START_TIMEOUT_S:g} s")

    def _proc(self, s: int) -> Process:
        if self.procs[s] is None:
            self.procs[s] = Process(self.slots[s])
            if self.closed[s]:
                self.closed[s] = False
            else:
                self.counts["replaced"] += 1
        return self.procs[s]                                     # type: ignore[return-value]

    def _feed(self, proc: Process, pending: deque[Job], depth: int) -> None:
        if not proc.ready:
            return
        while pending and len(proc.inflight) < depth:
            if proc.inflight and (proc.inflight[0].alone or pending[0].alone):
                return
            job = pending.popleft()
            try:
                proc.send(job, prepare=depth > 1 and not job.alone)
            except OSError:
                pending.appendleft(job)
                return                  # the process is gone: its pipe says so next
            if job.alone:
                return

    def _read(self, s: int, pending: deque[Job]) -> None:
        proc = self._proc(s)
        try:
            while proc.reader.poll():
                message = json.loads(proc.reader.recv_bytes())
                if "ready" in message:
                    proc.ready = True
                    self.failed_starts[s] = 0
                    continue
                job = proc.inflight.popleft()
                proc.clock = time.monotonic()
                job.seconds = message.get("seconds", {})
                if message["ok"]:
                    job.costs = message["costs"]
                else:
                    job.error = f"{message['error']} (measured on {proc.label})"
                if message.get("restart"):
                    self._replace(s, pending, kill=False)
                    return
        except (EOFError, OSError, ValueError):
            self._died(s, pending)

    def _died(self, s: int, pending: deque[Job]) -> None:
        proc = self._proc(s)
        if not proc.ready:
            self._lost(s, "it ended before it was ready")
            return
        inflight = list(proc.inflight)
        code = proc.stop()
        self.procs[s] = None
        if len(inflight) == 1:
            job = inflight[0]
            self.counts["crashed"] += 1
            words = proc.words
            job.error = (f"the candidate crashed the process measuring it on {proc.label}: {how_it_died(code)}, "
                         f"{time.monotonic() - proc.clock:.1f} s into its measurement; the process was replaced and "
                         "the other candidates went on" + (f". Its last words:\n{words}" if words else ""))
        else:                       # which one killed it is not known: each again, alone
            for job in reversed(inflight):
                job.alone = True
                pending.appendleft(job)

    def _timed_out(self, s: int, pending: deque[Job]) -> None:
        proc = self._proc(s)
        job = proc.inflight.popleft()
        self.counts["timed out"] += 1
        job.error = (f"the candidate ran past the runner's time limit of {self.timeout_s:g} s on {proc.label} "
                     "(Runner(timeout_s=...) raises it); the process measuring it was killed and replaced")
        self._replace(s, pending, kill=True)

    def _replace(self, s: int, pending: deque[Job], kill: bool) -> None:
        proc = self._proc(s)
        for job in reversed(proc.inflight):         # not theirs: measured again elsewhere or by the new one
            pending.appendleft(job)
        proc.inflight.clear()
        proc.stop(kill=kill)
        self.procs[s] = None

    def _lost(self, s: int, why: str) -> None:
        proc = self._proc(s)
        code = proc.stop(kill=True)
        words = proc.words
        self.procs[s] = None
        self.failed_starts[s] += 1
        self.start_failure = (f"the measuring process on {proc.label} could not start: {why} ({how_it_died(code)})"
                              + (f". Its last words:\n{words}" if words else ""))

    def close(self) -> None:
        """End every process (their pipes closed: each finishes nothing, being idle)."""
        for s, proc in enumerate(self.procs):
            if proc is not None:
                proc.stop(kill=bool(proc.inflight))
                self.procs[s] = None
                self.closed[s] = True
