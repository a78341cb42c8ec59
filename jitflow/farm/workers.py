"""build_all's forked worker processes, which say which task a dead worker was running and of what it
died.

concurrent.futures' process pool breaks as a whole: one worker killed (the OOM killer, a crash of
TVM on one candidate) fails every task still pending with BrokenProcessPool, and which task killed
it is not known. Here each worker is forked from the caller (it inherits what the tasks need,
nothing is pickled but the tasks and their results), runs one task at a time from its pipe, and
sends each result as it comes, then an end marker. The caller waits on every worker's pipe and
process at once: a worker whose process ends before its task's end marker died of that task.
`died` is told the task, the results it had sent and the exit status, and returns the tasks to run
instead (none, or its items again one by one); a new worker takes the dead one's place.
"""
from __future__ import annotations

import multiprocessing
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

#: what a worker sends: a result of its task, or that the task is done
_RESULT, _END = "result", "end"

Work = Callable[[Any, Callable[[Any], None]], None]


def _serve(conn: Connection, work: Work) -> None:
    """A worker's life: run each task it is sent (None: stop), sending its results and then _END."""
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        work(task, lambda result: conn.send((_RESULT, result)))
        conn.send((_END, None))


class _Worker:
    """One forked process, its end of the pipe, and the task it runs (None: idle)."""

    def __init__(self, ctx: Any, work: Work) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, work), name="jitflow-build-worker")
        self.process.start()
        child.close()
        self.task: Any = None
        self.sent: list[Any] = []

    def give(self, task: Any) -> None:
        self.task, self.sent = task, []
        self.conn.send(task)

    def read(self, result: Callable[[Any], None]) -> bool:
        """Take what the worker has sent; False once its pipe is closed (the process is gone)."""
        try:
            while self.task is not None and self.conn.poll():
                kind, value = self.conn.recv()
                if kind == _RESULT:
                    self.sent.append(value)
                    result(value)
                else:
                    self.task = None
        except (EOFError, OSError):
            return False
        return True

    def stop(self, kill: bool = False) -> None:
        """End the process: asked to (it finishes nothing, being idle), or killed."""
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:           # already gone
                pass
        self.process.join()
        self.conn.close()


def run(tasks: list[Any], jobs: int, work: Work, result: Callable[[Any], None],
        died: Callable[[Any, list[Any], int | None], list[Any]]) -> None:
    """Run work(task, send) for each task in up to `jobs` forked processes; result(r) for each r a
    task sends, as it arrives; died(task, its results so far, exit status) for a task whose process
    died (the status is -N for signal N), which returns the tasks to run in its place."""
    ctx = multiprocessing.get_context("fork")
    pending = deque(tasks)
    workers: list[_Worker] = []
    clean = False
    try:
        while pending or any(w.task is not None for w in workers):
            for w in [w for w in workers if w.task is None and not w.process.is_alive()]:
                w.stop()                          # ended between tasks: replaced below
                workers.remove(w)
            for w in workers:
                if w.task is None and pending:
                    w.give(pending.popleft())
            while pending and len(workers) < jobs:
                workers.append(_Worker(ctx, work))
                workers[-1].give(pending.popleft())
            busy = [w for w in workers if w.task is not None]
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for w in busy:
                open_pipe = w.read(result)
                if w.task is None or (open_pipe and w.process.is_alive()):
                    continue
                w.read(result)                    # what it sent before it died
                if w.task is None:
                    continue
                w.process.join()
                w.conn.close()
                workers.remove(w)
                pending.extendleft(reversed(died(w.task, w.sent, w.process.exitcode)))
        clean = True
    finally:
        for w in workers:
            w.stop(kill=not clean)
