"""A MetaSchedule target as jitflow.compile's arguments.

MetaSchedule tunes CPU kernels for an llvm target; jitflow builds them as its C host, for the host its
`mtriple` names, at the CPU level its `mcpu` names where that is one of jitflow's levels (x86-64-v3,
neoverse-v2, native, ...; LLVM's model names such as znver4 have no level: the baseline is built, said
once). `num-cores` decides the search (MetaSchedule's rules and the runner's threads), not the bytes of
a build: TVM's LLVM host does not read it when it builds a scheduled module, and neither does jitflow,
so candidates that differ only in it are one library. A CUDA target is built as it is (its arch and
limits), with its host.
"""
from __future__ import annotations

import logging
from typing import Any

from ..errors import TargetError
from ..logs import warn_once
from ..targets import cpu_level, hosts
from ..targets.spec import plain

log = logging.getLogger("jitflow")


def compile_arguments(target: Any) -> dict[str, Any]:
    """jitflow.compile's target, host and cpu_level for a tvm.target.Target MetaSchedule tunes for."""
    config = plain(target.export())
    kind = config.get("kind")
    if kind in ("llvm", "c"):
        host = hosts.from_tvm({"kind": "llvm", "mtriple": config["mtriple"]}) if config.get("mtriple") else None
        return {"target": "c", "host": host, "cpu_level": _level(config.get("mcpu"))}
    if kind == "cuda":
        host_config = config.pop("host", None)
        host = hosts.from_tvm(host_config if host_config and host_config.get("kind") != "c" else None)
        return {"target": config, "host": host}    # all of it: jitflow.compile(mod, target) is the same key
    raise TargetError(f"jitflow.meta_schedule.Builder builds llvm (as the C host) and cuda targets, not {kind!r}")


def _level(mcpu: Any) -> str | None:
    """The CPU level an llvm target's mcpu names, or None (the baseline) where none matches."""
    if not mcpu:
        return None
    try:
        return cpu_level.normalize(str(mcpu))
    except TargetError:
        warn_once(f"mcpu {mcpu}", "jitflow: the tuning target's mcpu %r is not one of jitflow's CPU levels; "
                  "candidates are built for the architecture's baseline (name a level such as x86-64-v3 "
                  "as mcpu to build for more)", mcpu)
        return None


