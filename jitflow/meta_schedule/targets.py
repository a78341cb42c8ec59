"""The targets jitflow.meta_schedule.Builder takes: MetaSchedule's llvm (built as jitflow's C host)
and cuda targets. Each is passed to jitflow.compile as it is, where jitflow.targets.reading reads its
host, CPU level (mcpu) and arch, the same way as for `jitflow.compile(sch.mod, target)` afterwards.
"""
from __future__ import annotations

from typing import Any

from ..errors import TargetError
from ..targets import reading


def checked(target: Any) -> Any:
    """`target` itself, where it is a kind the Builder builds; else a TargetError saying which it builds."""
    kind = reading.read(target).kind
    if kind not in ("c", "cuda"):
        raise TargetError(f"jitflow.meta_schedule.Builder builds llvm (as the C host) and cuda targets, not {kind!r}")
    return target
