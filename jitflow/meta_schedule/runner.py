"""jitflow.meta_schedule.Runner: MetaSchedule's candidates timed as LocalRunner times them, in
measuring processes that stay up, on every GPU of the machine.

The numbers stand beside LocalRunner's: the same EvaluatorConfig (number, repeat, min_repeat_ms, CPU
cache flush) and the same argument filling, through LocalRunner's own default functions
(measure_worker.py). What differs is around them: the processes are started once (when the Runner
is made, so that their start-up overlaps the first builds) and kept; libraries are loaded through
jitflow's loader, nothing linked; arguments are filled once per workload and shape; a GPU process
loads the next candidate's library while it times the current one.

Where candidates are timed: a CUDA task's on every GPU of one model (the first device's; others are
left out, and the log says so), each GPU's process taking the next candidate as it finishes one; a
CPU task's one at a time in one process, as LocalRunner does (parallel CPU measurements disturb each
other). run() returns when its batch is timed, as LocalRunner's does, so that no build or search of
the tuner runs beside a measurement.
"""
from __future__ import annotations

import itertools
import logging
import time
import weakref
from typing import Any, Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import (EvaluatorConfig, PyRunner, PyRunnerFuture, RunnerFuture, RunnerInput,
                                           RunnerResult)

from ..errors import InvalidInputError
from . import gpus as gpu_list
from .measure_pool import Job, Pool
from .measure_worker import device_name

log = logging.getLogger("jitflow")
_ids = itertools.count()


@derived_object
class _Finished(PyRunnerFuture):
    """A candidate's result, already there (run() returns once its batch is timed)."""

    def __init__(self, result: RunnerResult) -> None:
        super().__init__()
        self._result = result

    def done(self) -> bool:
        return True

    def result(self) -> RunnerResult:
        return self._result


def _plain(value: Any) -> Any:
    """An ArgInfo's JSON (TVM containers) as plain Python lists, strings and numbers."""
    if isinstance(value, (str, int, float)) or value is None:
        return value
    if hasattr(value, "value") and isinstance(value.value, (int, float)):
        return value.value
    try:
        return [_plain(v) for v in value]
    except TypeError:
        return str(value)


@derived_object
class Runner(PyRunner):
    """A MetaSchedule Runner (ms.tune_tir, ms.tune_tasks, jitflow.meta_schedule.tune_relax take it as
    runner=) that times candidates as LocalRunner does, in measuring processes that stay up.

    timeout_s: seconds one candidate may take to load and time (LocalRunner's timeout_sec); past it
    its process is killed and replaced. evaluator_config: LocalRunner's EvaluatorConfig (default
    number=3, repeat=1, min_repeat_ms=100, no CPU cache flush). alloc_repeat: argument sets per
    candidate, as LocalRunner's. devices: the GPUs to measure on, as CUDA numbers them in this
    process (default every visible GPU); CPU candidates are timed on the first one's process.
    Call close() to end the processes before the Runner goes (they end with the process anyway).
    """

    timeout_s: float
    evaluator_config: EvaluatorConfig
    alloc_repeat: int

    def __init__(self, timeout_s: float = 30.0, evaluator_config: EvaluatorConfig | None = None,
                 alloc_repeat: int = 1, devices: Sequence[int] | None = None) -> None:
        super().__init__()
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < 1e9:
            raise InvalidInputError(f"timeout_s must be a number of seconds above 0, not {timeout_s!r}")
        if isinstance(alloc_repeat, bool) or not isinstance(alloc_repeat, int) or alloc_repeat < 1:
            raise InvalidInputError(f"alloc_repeat must be a whole number, 1 or more, not {alloc_repeat!r}")
        if evaluator_config is not None and not isinstance(evaluator_config, EvaluatorConfig):
            raise InvalidInputError("evaluator_config must be a tvm.s_tir.meta_schedule.runner.EvaluatorConfig, "
                                    f"not {type(evaluator_config).__name__}")
        self.timeout_s = float(timeout_s)
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.alloc_repeat = alloc_repeat
        self.gpus = gpu_list.chosen(gpu_list.visible(), devices)
        self.same_model, self.left_out = gpu_list.one_model(self.gpus)
        self.pool = Pool(self.gpus, self.timeout_s)
        weakref.finalize(self, self.pool.close)          # at the latest when this process ends
        self._said_devices = False
        self.totals: dict[str, float] = {"candidates": 0, "failed": 0, "load s": 0.0, "alloc s": 0.0,
                                         "evaluator s": 0.0}

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        """Time every candidate; one future each, in order, all finished when this returns."""
        jobs = [self._job(i) for i in runner_inputs]
        cuda = [j for j in jobs if device_name(j.request["device_type"]) == "cuda"]
        others = [j for j in jobs if device_name(j.request["device_type"]) != "cuda"]
        if cuda:
            if not self.gpus:
                for job in cuda:
                    job.error = "no CUDA GPU is visible to this process (the CUDA driver shows none)"
            else:
                self._say_devices()
                slots = [self.gpus.index(g) for g in self.same_model]
                self.pool.measure([j for j in cuda if j.error is None], slots, depth=2)
        if others:
            self.pool.measure(others, [0], depth=1)
        return [self._future(job) for job in jobs]

    def _job(self, runner_input: RunnerInput) -> Job:
        config = self.evaluator_config
        return Job({"id": next(_ids), "artifact": str(runner_input.artifact_path),
                    "device_type": str(runner_input.device_type),
                    "args_info": [_plain(a.as_json()) for a in runner_input.args_info],
                    "evaluator": [config.number, config.repeat, config.min_repeat_ms, config.enable_cpu_cache_flush],
                    "alloc_repeat": self.alloc_repeat})

    def _future(self, job: Job) -> RunnerFuture:
        self.totals["candidates"] += 1
        if job.device:
            self.totals[f"timed on {job.device}"] = self.totals.get(f"timed on {job.device}", 0) + 1
        for name in ("load", "alloc", "evaluator"):
            self.totals[f"{name} s"] += float(job.seconds.get(name, 0.0))
        if job.costs is not None:
            return _Finished(RunnerResult(job.costs, None))
        self.totals["failed"] += 1
        return _Finished(RunnerResult(None, f"jitflow.meta_schedule.Runner: {job.error}"))

    def _say_devices(self) -> None:
        if self._said_devices:
            return
        self._said_devices = True
        names = ", ".join(str(g.index) for g in self.same_model)
        log.info("jitflow.meta_schedule.Runner: CUDA candidates are timed on %d GPU(s) of one model, %s: %s",
                 len(self.same_model), self.same_model[0].name, names)
        if self.left_out:
            log.warning("jitflow.meta_schedule.Runner: %s left out: a task's candidates are timed on GPUs of one "
                        "model (%s, the first device's), so that their times compare; give devices=[...] to choose",
                        ", ".join(str(g) for g in self.left_out), self.same_model[0].name)

    def wait_ready(self) -> float:
        """Wait until the measuring processes have started (run() waits by itself; this lets a caller
        pay their start-up, importing TVM, before tuning); the seconds waited."""
        start = time.perf_counter()
        self.pool.wait_ready(list(range(len(self.pool.slots))))
        return time.perf_counter() - start

    def stats(self) -> dict[str, float]:
        """What the runner did so far: candidates and failures, and how many each device timed
        ("timed on cuda:1 (...)"); seconds its processes spent loading libraries, filling arguments and
        in the evaluator; crashes, timeouts, processes replaced, and seconds waited for processes to
        start."""
        return {**self.totals, **self.pool.counts}

    def close(self) -> None:
        """End the measuring processes now (a later run() starts them again)."""
        self.pool.close()
