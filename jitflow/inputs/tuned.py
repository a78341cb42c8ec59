"""Modules MetaSchedule measured in this process, and the CPU level each was built at.

jitflow.meta_schedule.Builder builds every candidate at the CPU level its target names (an llvm
target's mcpu). The best one compiled afterwards at another level (`jitflow.compile(sch.mod, "c")`
after tuning for `{"kind": "llvm", "mcpu": "x86-64-v3"}`) is another library, built for another CPU,
and not the one that was measured. The Builder remembers each candidate here, by the structural hash
of the module jitflow.compile takes (ir_module.prepare's copy); jitflow.compile looks its module up,
once anything was remembered, and warns when it asks for another level. Kept: the last MAX_KEPT
candidates of the process.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..logs import warn_once
from ..targets.cpu_level import BASELINES

MAX_KEPT = 200_000
_tuned: OrderedDict[int, tuple[str, str]] = OrderedDict()   # structural hash -> (level, label)
_lock = threading.Lock()


def level_name(level: Any, host: str) -> str:
    """A build's CPU level in words: its CpuLevel's, or the host's baseline for None."""
    return level.describe() if level is not None else BASELINES.get(host, "the baseline")


def _hash(mod: Any) -> int:
    import tvm_ffi

    return int(tvm_ffi.structural_hash(mod))


def remember(mod: Any, level: str, label: str) -> None:
    """`mod` (as jitflow.compile prepared it) was built while tuning at CPU level `level`."""
    key = _hash(mod)
    with _lock:
        _tuned[key] = (level, label)
        _tuned.move_to_end(key)
        while len(_tuned) > MAX_KEPT:
            _tuned.popitem(last=False)


def tuned_at(mod: Any) -> tuple[str, str] | None:
    """(level, label) of `mod` if it was built while tuning in this process, else None."""
    with _lock:
        if not _tuned:
            return None
    key = _hash(mod)
    with _lock:
        return _tuned.get(key)


def check(mod: Any, level: str) -> None:
    """Warn (once per module and level) when `mod` was tuned here at a CPU level other than `level`."""
    found = tuned_at(mod)
    if found is None or found[0] == level:
        return
    tuned_level, label = found
    warn_once(f"tuned level {label} {level}",
              "jitflow.compile: this module is %r, which jitflow.meta_schedule.Builder built and MetaSchedule measured "
              "at CPU level %s; it is compiled now at %s, which makes another library than the one measured. Compile "
              "it with the target it was tuned for (its mcpu), or pass cpu_level=%r.",
              label, tuned_level, level, tuned_level.split(" ")[0])
