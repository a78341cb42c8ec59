"""Tuning runs that draw the same candidates again: the one random state MetaSchedule's `seed` does not
reach.

`seed=` seeds the search (its C++ random states: sampling, mutation, the eps-greedy picks). The
cost model's scores are drawn elsewhere: XGBModel, MetaSchedule's default, ranks candidates by
numpy's global random state until it has 100 measured samples, and that state is seeded from the
operating system in every process. So a rerun with the same seed and one tuning core picked other
candidates in its first round (only the 5% of eps-greedy picks repeated). seeded() seeds numpy's
global state for the tuning and puts it back afterwards. (RandomModel(seed=None), what
cost_model="random" makes, reseeds that state from the operating system: give it the seed,
RandomModel(seed=seed).) docs/tuning.md says which rounds then repeat.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..errors import InvalidInputError


@contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """numpy's global random state seeded with `seed` inside the block, and put back after it (None:
    left alone).

        with jitflow.meta_schedule.seeded(1):
            database = ms.tune_tir(mod, target, work_dir, 64, seed=1, num_tuning_cores=1, builder=Builder())
    """
    if seed is None:
        yield
        return
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise InvalidInputError(f"seed must be a whole number from 0 to 2**32 - 1 (or None), not {seed!r}")
    import numpy as np

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
