"""Chrome trace event JSON, the format Perfetto (ui.perfetto.dev) and chrome://tracing open.

A document is {"traceEvents": [...], "displayTimeUnit": "ns"|"ms", "otherData": {...}}. Events used
here: "M" (metadata: the names of processes and tracks), "X" (a complete slice: ts and dur), "b"/"e"
(an async slice: begin and end, matched by cat and id; they may overlap, as storage lifetimes do),
"C" (a counter: its args are the values from ts on). Times are microseconds (floats allowed).
"""
from __future__ import annotations

import json
from typing import Any, Iterable

PID = 1


def track_name(tid: int, name: str, pid: int = PID) -> dict[str, Any]:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def process_name(name: str, pid: int = PID) -> dict[str, Any]:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def complete(name: str, ts: float, dur: float, tid: int, cat: str, args: dict[str, Any] | None = None,
             pid: int = PID) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args or {}}


def async_slice(name: str, start: float, end: float, tid: int, cat: str, ident: int,
                args: dict[str, Any] | None = None, pid: int = PID) -> list[dict[str, Any]]:
    """The begin and end events of an async slice (one lifetime)."""
    base = {"name": name, "cat": cat, "id": ident, "pid": pid, "tid": tid}
    return [{**base, "ph": "b", "ts": start, "args": args or {}}, {**base, "ph": "e", "ts": end}]


def counter(name: str, ts: float, values: dict[str, float], pid: int = PID) -> dict[str, Any]:
    return {"ph": "C", "name": name, "ts": ts, "pid": pid, "tid": 0, "args": values}


def document(events: Iterable[dict[str, Any]], unit: str = "ms", **other: Any) -> dict[str, Any]:
    return {"traceEvents": list(events), "displayTimeUnit": unit, "otherData": other}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=True)
