"""Checks of a Chrome trace event document (what Perfetto and chrome://tracing open), for the tests
of the report's and the trace's timelines."""
from __future__ import annotations

import json
from typing import Any


def check(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Known phases, times that are numbers from 0 on, complete slices with a length, every async
    begin matched by an end of the same category and id no earlier than it; returns the events."""
    events = doc["traceEvents"]
    assert events and json.loads(json.dumps(doc)) == doc
    opened: dict[tuple[str, int], float] = {}
    for e in events:
        assert e["ph"] in ("M", "X", "b", "e", "C") and isinstance(e["pid"], int) and "name" in e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
        if e["ph"] == "b":
            opened[(e["cat"], e["id"])] = e["ts"]
        if e["ph"] == "e":
            assert opened.pop((e["cat"], e["id"])) <= e["ts"]
    assert not opened
    return events


def counter_max(events: list[dict[str, Any]]) -> int:
    return max(e["args"]["bytes"] for e in events if e["ph"] == "C")
