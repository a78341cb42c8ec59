"""Tuning through jitflow: MetaSchedule's candidates built by jitflow (docs/tuning.md).

    from jitflow.meta_schedule import Builder
    database = ms.tune_tir(mod, target, work_dir, max_trials_global=64, builder=Builder())
    tuned = jitflow.meta_schedule.tune_relax(model, target, work_dir, max_trials_global=64)

Importing this module imports TVM's MetaSchedule (slow): `import jitflow` never does.
"""
from __future__ import annotations

from .builder import Builder
from .relax import tune_relax

__all__ = ["Builder", "tune_relax"]
