"""What the tuning tests share: MetaSchedule's logging fixed for pytest, a quick search space and
evaluator, the workload and target they tune."""
from __future__ import annotations

import logging

import kernels
import tvm
from tvm.s_tir import meta_schedule as ms

TARGET = {"kind": "llvm", "num-cores": 2}
#: random traces of the search space (the evolutionary search's population of 2048 is slow to breed)
STRATEGY = "replay-trace"
#: each candidate timed twice (MetaSchedule's default runs each for 100 ms)
QUICK = ms.runner.EvaluatorConfig(number=2, repeat=1, min_repeat_ms=0)
#: MetaSchedule's time for a candidate that failed to build or run
FAILED = 1e9


def meta_schedule_logging() -> None:
    """Call right before tuning: MetaSchedule re-reads its logger's handlers by name when it tunes, and
    pytest's capture handlers, attached to that logger for each test phase, have none."""
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in logger.handlers if h.get_name() is None]:
        logger.removeHandler(handler)


def quick_space():
    """MetaSchedule's llvm search space with unrolling up to 64 steps and vectors up to 16 lanes (its own
    goes to 512 and 64: megabytes of C for some candidates, seconds to build each)."""
    rules = [r for r in ms.ScheduleRule.create("llvm")
             if not isinstance(r, ms.schedule_rule.ParallelizeVectorizeUnroll)]
    rules.append(ms.schedule_rule.ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=16,
                                                             unroll_max_steps=[0, 16, 64], unroll_explicit=True))
    return ms.space_generator.PostOrderApply(sch_rules=rules)


def quick_runner():
    """MetaSchedule's LocalRunner with the QUICK evaluator."""
    return ms.runner.LocalRunner(evaluator_config=QUICK)


def matmul():
    return kernels.matmul()["main"]


def measured(database) -> list:
    """The records of candidates that were built and timed."""
    return [r for r in database.get_all_tuning_records() if r.run_secs and all(float(s) < FAILED for s in r.run_secs)]


def candidate_hash(record) -> int:
    import tvm_ffi

    return tvm_ffi.structural_hash(record.as_measure_candidate().sch.mod)


def target():
    return tvm.target.Target(TARGET)


def best_matmul_runs_on_the_gpu(database, target) -> None:
    """The best matmul schedule of `database`, compiled by jitflow for `target` (a hit: its candidate was
    built while tuning), against torch's product on the GPU."""
    import jitflow
    import torch

    sch = ms.tir_integration.compile_tir(database, matmul(), target)
    exe = jitflow.compile(sch.mod, target)
    assert exe.cached()
    a, b = torch.rand(128, 128, device="cuda"), torch.rand(128, 128, device="cuda")
    c = torch.zeros(128, 128, device="cuda")
    exe["main"](a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
