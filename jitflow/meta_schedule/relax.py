"""A Relax model tuned through jitflow in one call: what TVM's tuning pipeline does around
MetaScheduleTuneIRMod (which always builds with MetaSchedule's "local" builder), with jitflow's Builder
and Runner.

    tuned = jitflow.meta_schedule.tune_relax(model, {"kind": "llvm", "num-cores": 2}, "logs", 64)
    exe = jitflow.compile(tuned, "c")             # the tuned schedules, built by jitflow as its C host
"""
from __future__ import annotations

from typing import Any

from .builder import Builder
from .runner import Runner
from .seeding import seeded


def tune_relax(mod: Any, target: Any, work_dir: str, max_trials_global: int, *,
               max_trials_per_task: int | None = None, op_names: list[str] | None = None,
               params: dict[str, Any] | None = None, builder: Any = None, runner: Any = None,
               **tune_options: Any) -> Any:
    """Tune a Relax IRModule's operators with MetaSchedule, building every candidate with `builder`
    (default Builder()) and timing it with `runner` (default Runner(), whose processes end with the
    call; give MetaSchedule's LocalRunner() to time with it); returns the module with the best
    schedules applied (records in `work_dir`).

    As relax.pipeline.static_shape_tuning_pipeline does: the operators are decomposed and legalized to
    TIR (the zero pipeline), tuned (ms.relax_integration.tune_relax, which takes `tune_options` such as
    cost_model=, num_trials_per_iter=, seed=), and the database applied under the target.
    With seed= the cost model's draws are seeded too (seeding.seeded; cost_model="random" becomes
    RandomModel(seed=seed)), so a rerun draws what docs/tuning.md says it draws.
    Build the result with jitflow.compile(tuned, "c") (a CUDA target: jitflow.compile(tuned, target)).
    """
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    target = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    with target:
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(),
                                        relax.get_pipeline("zero")])(mod)
    seed = tune_options.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and tune_options.get("cost_model") == "random":
        tune_options["cost_model"] = ms.cost_model.RandomModel(seed=seed)   # "random" would reseed from the OS
    own = Runner() if runner is None else None
    try:
        with seeded(seed):
            ms.relax_integration.tune_relax(mod, params or {}, target, work_dir, max_trials_global,
                                            max_trials_per_task=max_trials_per_task, op_names=op_names,
                                            builder=builder if builder is not None else Builder(),
                                            runner=own if own is not None else runner, **tune_options)
    finally:
        if own is not None:
            own.close()
    with target:
        return relax.transform.MetaScheduleApplyDatabase(work_dir)(mod)
