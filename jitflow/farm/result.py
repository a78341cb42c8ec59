"""What build_all hands back for each executable, and the checks on what it is given."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import InvalidInputError
from ..text.format import article

#: where build_all can build: forked processes on this machine, or the Ray cluster the process is connected to
BACKENDS = ("local", "ray")


@dataclass
class BuildResult:
    """The outcome of one executable in build_all: its build_info, or the error that stopped it."""

    executable: Any
    ok: bool
    outcome: str = ""            # "hit", "built", "shared" (from the shared tier), or "" on error
    error: str | None = None
    error_type: str | None = None
    #: where it was built or found: "here" (this process or its forked workers), or "ray <node>"
    where: str = "here"
    #: why an item meant for the cluster was built here instead (its inputs do not travel, or the
    #: worker's key differed), or None
    note: str | None = None

    def __repr__(self) -> str:
        state = self.outcome if self.ok else f"{self.error_type}: {(self.error or '').splitlines()[0]}"
        return f"<BuildResult {state} ({self.where})>"


def failed(exe: Any, exc: BaseException, where: str = "here", note: str | None = None) -> BuildResult:
    """The result of an item whose build raised `exc`."""
    return BuildResult(exe, False, error=str(exc), error_type=type(exc).__name__, where=where, note=note)


def checked(executables: Any, jobs: Any, backend: Any, timeout_s: Any = None) -> list[Any]:
    """The executables as a list, after refusing what build_all cannot take (before anything is built)."""
    from ..executable import Executable, check_timeout

    check_timeout(timeout_s)

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidInputError(f"jobs must be a whole number of processes, 1 or more (or None for one per "
                                f"CPU), not {jobs!r}")
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, not {backend!r}")
    if isinstance(executables, (Executable, str, bytes)) or not isinstance(executables, Iterable):
        raise InvalidInputError(f"build_all takes a list of Executables (from jitflow.compile), "
                                f"not {type(executables).__name__}")
    items = list(executables)
    for i, exe in enumerate(items):
        if not isinstance(exe, Executable):
            kind = type(exe).__name__
            raise InvalidInputError(f"build_all: item {i} is {article(kind)} {kind}, not an Executable "
                                    "(make one with jitflow.compile(mod, target))")
    return items
