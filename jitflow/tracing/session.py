"""`jitflow.trace()`: record what the CUDA driver does while calls run, split per call.

    with jitflow.trace(exe) as t:          # exe (or its report) to check the trace against
        vm = exe.vm("cuda")                # the VM's start-up: its constants uploaded
        for _ in range(3):
            y = t.call(vm["main"], x)      # one window per call; the GPU is synchronized after each
    print(t)                               # per call and in total; t.to_json() for scripts

Everything in the `with` block is recorded (the whole process's CUDA work, torch's included);
calls made through t.call() are split out, the rest is "before the first call" or "between".
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidInputError
from ..formats import chrome_trace
from . import text, timeline
from .events import Event, Window, event_json
from .match import Agreement, compare
from .summary import KernelTotal, Segment, Split, kernel_totals, split

SCHEMA = "jitflow.trace/1"


class Trace:
    """A trace of the CUDA driver's allocations, copies, memsets and kernel launches."""

    def __init__(self, report: Any = None, function: str = "main", *, startup: bool | None = None,
                 source: Any = None) -> None:
        if report is not None and hasattr(report, "inspect") and hasattr(report, "key"):
            report = report.inspect()                    # a jitflow Executable: its report
        self.report = report
        self.function = function
        self.startup = startup
        self.windows: list[Window] = []
        self.events: list[Event] = []
        self.record_counts: dict[str, int] = {}
        self._source = source
        self._running = False
        self._split: Split | None = None
        self.agreement: Agreement | None = None

    # ---- recording --------------------------------------------------------------------------
    def __enter__(self) -> "Trace":
        if self._running or self._split is not None:
            raise InvalidInputError("a Trace records once: make a new one with jitflow.trace()")
        if self._source is None:
            from .cupti_source import CuptiSource

            self._source = CuptiSource()
        self._source.start()
        self._running = True
        return self

    def call(self, fn: Callable[..., Any], *args: Any, label: str | None = None) -> Any:
        """Call fn(*args) as one traced call: its own window, the GPU synchronized before it ends."""
        if not self._running:
            raise InvalidInputError("Trace.call() works inside `with jitflow.trace() as t:`")
        self._source.sync()
        start = self._source.now()
        result = fn(*args)
        self._source.sync()
        self.windows.append(Window(label or f"call {len(self.windows) + 1}", start, self._source.now()))
        return result

    def __exit__(self, *exc: Any) -> None:
        self._running = False
        self.events = list(self._source.stop())
        self.record_counts = dict(getattr(self._source, "record_counts", {}))
        self._split = split(self.events, self.windows)
        if self.report is not None and exc[0] is None:
            traced = self.startup if self.startup is not None else \
                bool(self._split.before.copy("host->device").count)
            self.agreement = compare(self.report, self._split, self.function, traced)

    # ---- results ----------------------------------------------------------------------------
    @property
    def _done(self) -> Split:
        if self._split is None:
            raise InvalidInputError("the trace has not finished: read its results after the `with` block")
        return self._split

    @property
    def before(self) -> Segment:
        """Everything before the first call: loading the library, starting the VM (its constants)."""
        return self._done.before

    @property
    def calls(self) -> tuple[Segment, ...]:
        return self._done.calls

    @property
    def between(self) -> Segment:
        """Between calls and after the last one (reading results back, ...)."""
        return self._done.between

    @property
    def total(self) -> Segment:
        return self._done.total

    @property
    def kernels(self) -> list[KernelTotal]:
        return kernel_totals(self._done.total)

    def __str__(self) -> str:
        known = {k.name for k in self.report.kernels} if self.report is not None else None
        return text.render(self._done, self.kernels, self.agreement,
                           self.function if self.report is not None else None, known)

    def to_dict(self, events: bool = False) -> dict[str, Any]:
        """JSON-ready form (see docs/inspect.md); events=True adds every event."""
        s = self._done
        out = {"schema": SCHEMA, "function": self.function,
               "windows": [{"label": w.label, "start": w.start, "end": w.end} for w in self.windows],
               "before": s.before.to_json(), "calls": [c.to_json() for c in s.calls],
               "between": s.between.to_json(), "total": s.total.to_json(),
               "kernels": [k.to_json() for k in self.kernels],
               "agreement": None if self.agreement is None else self.agreement.to_json(),
               "records": dict(self.record_counts)}
        if events:
            out["events"] = [event_json(e) for e in self.events]
        return out

    def timeline(self, path: str | os.PathLike | None = None) -> dict[str, Any] | Path:
        """The trace as Chrome trace events with CUPTI's times (Perfetto, chrome://tracing): calls,
        kernels, copies, each allocation's lifetime and the device bytes in use. The document, or,
        with `path`, the path it was written to (as export_library returns)."""
        self._done                  # raises until the trace has finished
        doc = timeline.document(self.events, self.windows, f"jitflow trace of {self.function}")
        if path is not None:   # as export_library writes: never into a FIFO or folder, renamed into place
            from ..files import export_path

            dest = export_path.destination(path, what="Trace.timeline", written="the timeline", example="trace.json")
            export_path.write_atomically(dest, chrome_trace.dumps(doc), "Trace.timeline")
            return dest
        return doc

    def to_json(self, events: bool = False, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(events), indent=indent, sort_keys=True)


def trace(report: Any = None, function: str = "main", *, startup: bool | None = None) -> Trace:
    """A Trace to use as `with jitflow.trace() as t:`; t.call(fn, *args) runs one traced call.

    report: a jitflow Executable or its Report, to check the trace against (the kernels each call
    launches; the bytes uploaded at start-up). function: the function whose calls are checked.
    startup: whether the VM is started inside the trace (default: when any host->device copy
    happened before the first call). Needs cupti-python (pip install 'jitflow[trace]') and a GPU.
    """
    from .cupti_source import load_cupti

    load_cupti()          # ToolMissingError now, not at the `with`
    return Trace(report, function, startup=startup)
