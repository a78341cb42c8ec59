"""What a target says that jitflow uses, read in one place for every path that builds from a target.

jitflow.compile(mod, target) and jitflow.meta_schedule.Builder (through compile) read a target here,
so a library built while tuning and the one compiled afterwards from the same target are one key:

- kind: "c" for TVM's CPU kinds (llvm is built as the C host), else the kind as given;
- archs: the CUDA arch the target names, if any;
- host: the triple its host names (a CUDA target's `host`, an llvm host's `mtriple`), or an llvm
  target's own `mtriple`;
- cpu_level: the CPU level its `mcpu` names where that is one of jitflow's levels (x86-64-v3,
  neoverse-v2, native, ...): the llvm target's own, or a CUDA target's llvm host's. An LLVM model name
  (znver4, skylake) is no level: the baseline is built, said once. `mattr` is not used (said once).

`num-cores` and the other search options decide what MetaSchedule tries, not the bytes of a build:
TVM's LLVM host does not read them when it builds a scheduled module, and neither does jitflow.
Accepted spellings: a kind name, a dict, JSON text, TVM's target text ("llvm -mcpu=x86-64-v3") or
tag, or a tvm.target.Target. What cannot be read is left to resolve_target, which reports it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import TargetError
from ..logs import warn_once
from . import cpu_level, hosts

#: TVM's CPU target kinds, built as jitflow's C host
CPU_KINDS = ("llvm", "c")


@dataclass(frozen=True)
class TargetReading:
    """What a target says that jitflow uses (each None or empty where it says nothing)."""

    kind: str | None = None
    archs: tuple[str, ...] = ()
    host: str | None = None
    cpu_level: str | None = None
    #: where cpu_level came from, for messages ("the target's mcpu", "the target host's mcpu")
    cpu_level_from: str = ""


def read(target: Any) -> TargetReading:
    """The kind, CUDA arch, host triple and CPU level `target` names (see the module docstring)."""
    config = _config(target)
    if config is None:
        return TargetReading()
    kind = str(config.get("kind", "")).strip().lower() or None
    named_host = config.get("host")
    host_config = _config(named_host) if named_host is not None else None
    if isinstance(named_host, str) and named_host.strip().lower() not in CPU_KINDS and host_config \
            and " " not in named_host and not named_host.strip().startswith("{"):
        host_config = {"kind": "llvm", "mtriple": named_host.strip()}       # a bare triple
    if kind in CPU_KINDS:
        _say_mattr(config)
        host = _host_of(host_config) or _host_of(config)
        level = _level(config.get("mcpu"), "mcpu")
        return TargetReading("c", (), host, level, "the target's mcpu" if level else "")
    arch = config.get("arch")
    archs = tuple(str(a) for a in (arch if isinstance(arch, (list, tuple)) else [arch])) if arch else ()
    level = _level(host_config.get("mcpu"), "host mcpu") if host_config else None
    return TargetReading(kind, archs, _host_of(host_config), level, "the target host's mcpu" if level else "")


def _config(target: Any) -> dict[str, Any] | None:
    """A target as TVM's config, a plain dict (its host a nested entry); None where it cannot be read."""
    from .spec import options_of, plain

    if target is None:
        return None
    if isinstance(target, dict):
        return dict(target)
    if isinstance(target, str):
        text = target.strip()
        if not text:
            return None
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return None
            return dict(value) if isinstance(value, dict) else None
        if " " in text:
            first = text.split()[0]
            try:
                return options_of(first, text[len(first):], text)
            except TargetError:
                return None
        if "/" not in text:
            return {"kind": text}
        try:
            import tvm

            target = tvm.target.Target(text)   # a tag: "nvidia/nvidia-h100"
        except Exception:  # noqa: BLE001 - resolve_target reports what TVM says
            return None
    if type(target).__name__ == "Target" and hasattr(target, "export"):
        config = plain(target.export())
        return config if isinstance(config, dict) else None
    return None


def _host_of(config: dict[str, Any] | None) -> str | None:
    """The triple a host or CPU target config names (its mtriple), else None."""
    if not config or str(config.get("kind", "")).strip().lower() not in CPU_KINDS or not config.get("mtriple"):
        return None
    try:
        return hosts.from_tvm({"kind": "llvm", "mtriple": config["mtriple"]})
    except TargetError:
        return None                     # resolve_target reports a host jitflow does not build for


def _level(mcpu: Any, what: str) -> str | None:
    """The CPU level an mcpu names, or None (the baseline) where it names none of jitflow's."""
    if not mcpu:
        return None
    try:
        return cpu_level.normalize(str(mcpu), what)
    except TargetError:
        warn_once(f"mcpu {mcpu}", "jitflow: the target's mcpu %r is not one of jitflow's CPU levels; the host "
                  "code is built for the architecture's baseline (name a level such as x86-64-v3 as mcpu, "
                  "or pass cpu_level=, to build for more)", mcpu)
        return None


def _say_mattr(config: dict[str, Any]) -> None:
    if config.get("mattr"):
        warn_once(f"mattr {config['mattr']}", "jitflow: the target's mattr %r is not used: jitflow builds the "
                  "host code for a CPU level (name one as mcpu, or pass cpu_level=)", config["mattr"])


def with_target_level(settings: Any, reading: TargetReading, explicit: bool) -> Any:
    """`settings` (a config.Settings) at the CPU level the target names, which wins over
    JITFLOW_CPU_LEVEL; `explicit`: cpu_level= was given, and a different level there is a TargetError."""
    if reading.cpu_level is None:
        return settings
    if explicit:
        if settings.cpu_level != reading.cpu_level:
            raise TargetError(f"cpu_level={settings.cpu_level!r} and {reading.cpu_level_from} "
                              f"{reading.cpu_level!r} disagree; give one of them (or the same level in both)")
        return settings
    return settings._replace(cpu_level=reading.cpu_level, cpu_level_from=reading.cpu_level_from)
