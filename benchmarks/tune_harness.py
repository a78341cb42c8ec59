"""What benchmarks/tune.py wraps around MetaSchedule's builders and runners: the build phase's and the
run phase's clocks, and each runner by name with the evaluator's own seconds (timed in the process that
measures: Runner counts them itself, LocalRunner's evaluator is wrapped)."""
from __future__ import annotations

import os
import tempfile
import time

#: MetaSchedule's run time for a candidate that failed to build or run (1e10 s)
FAILED_RUN = 1e9


def timed_builder(ms, inner, clock: dict):
    """`inner`, with its time added to clock['build'] and each result counted (built, failed, why)."""
    from tvm.ir.utils import derived_object

    @derived_object
    class TimedBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            start = time.perf_counter()
            try:
                results = inner.build(build_inputs)
            finally:
                clock["build"] += time.perf_counter() - start
            for result in results:
                if result.error_msg:
                    clock["failed"][reason(result.error_msg)] += 1
                else:
                    clock["built"] += 1
            return results

    return TimedBuilder()


def reason(message: str) -> str:
    """A build error's reason, short: "timeout", else the error's last line (a traceback's own)."""
    if "timeout" in message.lower() or "timed out" in message.lower():
        return "timeout"
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no message")[:120]


def timed_runner(ms, inner, clock: dict):
    """`inner`, with the time spent waiting for its results added to clock['run']."""
    from tvm.ir.utils import derived_object

    @derived_object
    class TimedFuture(ms.runner.PyRunnerFuture):
        def __init__(self, future):
            super().__init__()
            self.future = future

        def done(self):
            return self.future.done()

        def result(self):
            start = time.perf_counter()
            try:
                return self.future.result()
            finally:
                clock["run"] += time.perf_counter() - start

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        def run(self, runner_inputs):
            start = time.perf_counter()
            futures = inner.run(runner_inputs)
            clock["run"] += time.perf_counter() - start
            return [TimedFuture(f) for f in futures]

    return TimedRunner()


def local_runner(ms, config, log_path: str):
    """LocalRunner with its default evaluator, each call's seconds appended to `log_path` (in its worker)."""

    def timed_evaluator(rt_mod, device, evaluator_config, repeated_args):
        import time as clock

        from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

        start = clock.perf_counter()
        costs = run_evaluator_common(rt_mod, device, evaluator_config, repeated_args)
        with open(log_path, "a", encoding="utf-8") as out:
            out.write(f"{clock.perf_counter() - start}\n")
        return costs

    return ms.runner.LocalRunner(evaluator_config=config, f_run_evaluator=timed_evaluator)


class RunnerUnderTest:
    """A runner by name ("local", "jitflow", "jitflow:N"), started, and the evaluator's seconds so far."""

    def __init__(self, ms, name: str, config) -> None:
        from jitflow.meta_schedule import Runner

        self.name = name
        self.log = tempfile.mktemp(prefix="tune-bench-evaluator-")
        if name == "local":
            self.runner, self.devices = local_runner(ms, config, self.log), 1
        else:
            count = int(name.split(":")[1]) if ":" in name else None
            self.runner = Runner(evaluator_config=config, devices=None if count is None else list(range(count)))
            self.runner.wait_ready()
            self.devices = max(1, len(self.runner.same_model)) if count is None else count

    def evaluator_seconds(self) -> float:
        if self.name != "local":
            return self.runner.stats()["evaluator s"]
        try:
            with open(self.log, encoding="utf-8") as f:
                return sum(float(line) for line in f if line.strip())
        except OSError:
            return 0.0

    def close(self) -> None:
        if self.name != "local":
            self.runner.close()
        if os.path.exists(self.log):
            os.unlink(self.log)

    @property
    def label(self) -> str:
        if self.name == "local":
            return "LocalRunner"
        return f"Runner ({self.devices} device{'s' if self.devices > 1 else ''})"
