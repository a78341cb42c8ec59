"""Check a trace against the static report where they overlap: the kernels each call launches
(names, and grid and block where the report knows them) and the bytes uploaded at start-up (the
constants of a Relax model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..report.report import Report
from ..report.types import Launch
from .events import KernelLaunch
from .summary import Segment, Split


@dataclass(frozen=True)
class CallCheck:
    """One call: the kernels launched against the kernels the report says a call launches."""

    label: str
    launched: tuple[str, ...]
    missing: tuple[str, ...]             # in the report, not launched
    extra: tuple[str, ...]               # launched, not in the report's launches of this function
    dims: tuple[str, ...]                # grid or block that differ from the report's constants
    replayed: tuple[str, ...] = ()       # kernels the report and the trace see launched differently (CUDA graph)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.dims or self.replayed)


@dataclass(frozen=True)
class Agreement:
    """Where the report and the trace meet, and whether they agree."""

    function: str
    expected: tuple[str, ...] | None          # kernels one call launches, from the report (None: unknown)
    calls: tuple[CallCheck, ...]
    upload_expected: int | None               # the constants' bytes (a Relax model on a GPU), else None
    upload_measured: int | None               # host->device bytes before the first call (None: not traced)
    unknown_kernels: tuple[str, ...]          # launched kernels the report does not have at all

    @property
    def upload_ok(self) -> bool:
        return self.upload_expected is None or self.upload_measured is None or \
            self.upload_expected == self.upload_measured

    @property
    def ok(self) -> bool:
        return self.expected is not None and all(c.ok for c in self.calls) and self.upload_ok \
            and not self.unknown_kernels

    def lines(self) -> list[str]:
        """Plain-text lines: what agrees and what does not."""
        out = []
        if self.expected is None:
            out.append(f"kernels: the report does not know what {self.function} launches (no host code)")
        else:
            good = [c.label for c in self.calls if c.ok]
            if good:
                out.append(f"kernels: {', '.join(good)} launched what the report lists for {self.function} "
                           f"({len(self.expected)}: {', '.join(self.expected) or 'none'})")
            for c in self.calls:
                if not c.ok:
                    parts = ([f"missing {', '.join(c.missing)}"] if c.missing else []) + \
                            ([f"not in the report {', '.join(c.extra)}"] if c.extra else []) + list(c.dims) + \
                            list(c.replayed)
                    out.append(f"kernels: {c.label} differs from the report: {'; '.join(parts)}")
        if self.unknown_kernels:
            out.append(f"kernels not in the report at all: {', '.join(self.unknown_kernels)}")
        if self.upload_expected is not None:
            if self.upload_measured is None:
                out.append("start-up upload: not traced (create the VM inside the trace to see it)")
            else:
                verdict = "equals" if self.upload_ok else "differs from"
                out.append(f"start-up upload: {self.upload_measured} B host->device {verdict} the constants' "
                           f"{self.upload_expected} B")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "ok": self.ok,
                "expected": None if self.expected is None else list(self.expected),
                "calls": [{"label": c.label, "ok": c.ok, "launched": list(c.launched), "missing": list(c.missing),
                           "extra": list(c.extra), "dims": list(c.dims), "replayed": list(c.replayed)}
                          for c in self.calls],
                "upload": {"expected": self.upload_expected, "measured": self.upload_measured, "ok": self.upload_ok},
                "unknown_kernels": list(self.unknown_kernels)}


def expected_launches(report: Report, function: str) -> tuple[Launch, ...] | None:
    """The kernel launches of one call of `function`, as the report has them (None: unknown)."""
    if report.model is not None:
        return report.model.function(function).launches
    if report.functions is None:
        return None
    return tuple(x for x in report.launches if x.function == function)


def _remove(names: list[Any], items: Sequence[Any]) -> list[Any]:
    rest = list(names)
    for name in items:
        if name in rest:
            rest.remove(name)
    return rest


def _dims(expected: Sequence[Launch], launched: Sequence[KernelLaunch]) -> list[str]:
    """Grid and block of the n-th launch of each kernel, where the report's values are constants."""
    out = []
    for name in dict.fromkeys(x.kernel for x in expected):
        for want, got in zip([x for x in expected if x.kernel == name], [x for x in launched if x.kernel == name]):
            for what, dims, seen in (("grid", want.grid, got.grid), ("block", want.block, got.block)):
                values = tuple(d.value for d in dims)
                if None not in values and values != seen:
                    out.append(f"{name} {what} {values} in the report, {seen} launched")
    return out


def _replayed(expected: Sequence[Launch], launched: Sequence[KernelLaunch]) -> list[str]:
    """Kernels the report says a captured CUDA graph replays and the trace saw launched directly, or
    the other way round (checked where the trace saw any graph launch: CUPTI names the graph)."""
    if not any(x.replayed for x in launched):
        return []
    want = sorted((x.kernel, x.replayed) for x in expected)
    seen = sorted((x.kernel, x.replayed) for x in launched)
    word = {True: "replayed from a CUDA graph", False: "launched directly"}
    return [f"{name} {word[r]} in the report, not in the trace" for name, r in _remove(want, seen)]


def check_call(call: Segment, expected: Sequence[Launch]) -> CallCheck:
    names = [x.kernel for x in expected]
    launched = call.kernels
    return CallCheck(call.label, tuple(launched), tuple(_remove(names, launched)), tuple(_remove(launched, names)),
                     tuple(_dims(expected, call.launches)), tuple(_replayed(expected, call.launches)))


def compare(report: Report, split: Split, function: str, startup_traced: bool) -> Agreement:
    """Check the trace's calls of `function` (and the start-up, if it was traced) against the report."""
    expected = expected_launches(report, function)
    calls = tuple(check_call(c, expected) for c in split.calls) if expected is not None else ()
    known = {k.name for k in report.kernels}
    unknown = tuple(n for n in dict.fromkeys(split.total.kernels) if n not in known)
    upload = None
    if report.model is not None and report.model.upload is not None:
        upload = report.model.constant_bytes
    measured = split.before.copy("host->device").bytes if startup_traced else None
    return Agreement(function, None if expected is None else tuple(x.kernel for x in expected), calls, upload,
                     measured, unknown)
