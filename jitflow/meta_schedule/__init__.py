"""Tuning through jitflow: MetaSchedule's candidates built and timed by jitflow (docs/tuning.md).

    from jitflow.meta_schedule import Builder, Runner, seeded
    with seeded(1):
        database = ms.tune_tir(mod, target, work_dir, max_trials_global=64, builder=Builder(), runner=Runner(),
                               seed=1, num_tuning_cores=1)
    tuned = jitflow.meta_schedule.tune_relax(model, target, work_dir, max_trials_global=64)

Importing this module imports TVM's MetaSchedule (slow): `import jitflow` never does.
"""
from __future__ import annotations

from .builder import Builder
from .runner import Runner
from .relax import tune_relax
from .seeding import seeded

__all__ = ["Builder", "Runner", "seeded", "tune_relax"]
