"""This CPU's features, and the check that a library needs none it lacks (before dlopen: never SIGILL).

The features are read from /proc/cpuinfo, the kernel's own list: x86's "flags" (which leave out what
the kernel has not enabled, such as AVX-512 state it does not save, unlike the CPUID bits themselves)
and aarch64's "Features" (its HWCAPs). Where processors list different features, only those all
of them have count. The read is done once per process; `simulated()` stands in another CPU's list.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterable, Iterator, NamedTuple

from ..errors import LoadError

CPUINFO = "/proc/cpuinfo"
#: the /proc/cpuinfo field that lists features, by architecture
_FIELDS = {"x86_64": "flags", "aarch64": "features"}
_MODEL_FIELDS = ("model name", "cpu part")
_simulated: list[CpuFeatures] = []
_lock = threading.Lock()


class CpuFeatures(NamedTuple):
    """A CPU's features as /proc/cpuinfo names them, and its model name where it says one."""

    features: frozenset[str]
    model: str = ""


def parse(text: str, machine: str) -> CpuFeatures:
    """The features every processor listed in a /proc/cpuinfo text has, for an `machine` CPU."""
    field = _FIELDS.get(machine, "flags")
    lists: list[set[str]] = []
    model = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep:
            continue
        if key == field:
            lists.append(set(value.split()))
        elif key in _MODEL_FIELDS and not model:
            model = value.strip()
    return CpuFeatures(frozenset(set.intersection(*lists)) if lists else frozenset(), model)


@lru_cache(maxsize=1)
def _read() -> CpuFeatures:
    from .library_check import this_machine

    with open(CPUINFO, encoding="utf-8", errors="replace") as f:
        return parse(f.read(), this_machine())


def this_cpu() -> CpuFeatures:
    """This machine's CPU features (or the simulated ones); LoadError when they cannot be read."""
    with _lock:
        if _simulated:
            return _simulated[-1]
    try:
        return _read()
    except OSError as exc:
        raise LoadError(f"cannot read this CPU's features from {CPUINFO}: {exc.strerror or exc}") from None


@contextmanager
def simulated(features: Iterable[str], model: str = "simulated CPU") -> Iterator[CpuFeatures]:
    """Within the block, this process takes its CPU to have exactly `features` (for tests, and to
    see what another machine would refuse)."""
    cpu = CpuFeatures(frozenset(features), model)
    with _lock:
        _simulated.append(cpu)
    try:
        yield cpu
    finally:
        with _lock:
            _simulated.remove(cpu)


def missing(needs: Iterable[str]) -> list[str]:
    """The features in `needs` that this CPU lacks, sorted."""
    needs = set(needs)
    return sorted(needs - this_cpu().features) if needs else []


def require(needs: Iterable[str], level: str | None, what: str, action: str) -> None:
    """Raise LoadError naming the features in `needs` this CPU lacks: `what` is the library, in words
    ("cannot load k.so: it"), `action` what to do instead of loading it here."""
    needs = set(needs)
    if not needs:
        return
    try:
        lacking = missing(needs)
    except LoadError as exc:
        raise LoadError(f"{what} needs the CPU features {', '.join(sorted(needs))}, and {exc}") from None
    if not lacking:
        return
    from ..targets import cpu_level  # the error's path only: loading stays light
    from ..targets.hosts import machine_host

    cpu, host = this_cpu(), machine_host()
    lower = ""
    if host in cpu_level.LEVELS:
        reach = cpu_level.reached(host, cpu.features)
        lower = f", or build it with cpu_level={reach!r} (the highest level this CPU runs)"
    model = f" ({cpu.model})" if cpu.model else ""
    built = f"is built for CPU level {level} and " if level else ""
    raise LoadError(f"{what} {built}needs the CPU features {', '.join(lacking)}, which this CPU{model} lacks: "
                    f"{action}{lower}")
