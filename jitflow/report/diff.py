"""What changed between two reports (two schedules, two pass configurations): kernels and their
launches and resources, device allocations (count and bytes), copies, for Relax models the memory
plan of each call and of start-up (memory_plan_diff.py), and whether the libraries' bytes differ
where the reports cannot show how (a library inspected without its IR)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import memory_plan_diff
from .report import Report
from .text import dims, size_text
from .types import Allocation, Kernel

SCHEMA = "jitflow.inspect-diff/2"


@dataclass(frozen=True)
class Change:
    """One field that differs: what (e.g. "main_kernel block"), its text in a and in b."""

    what: str
    a: str
    b: str


def _kernel_facts(k: Kernel) -> dict[str, str]:
    facts = {
        "launches": str(len(k.launches)),
        "grid": dims(k.grid), "block": dims(k.block),
        "dynamic shared memory": size_text(k.dynamic_shared_memory) if k.dynamic_shared_memory else "-",
        "args": ", ".join(a.dtype for a in k.args),
    }
    for a in k.archs:
        facts[f"registers {a.arch}"] = "?" if a.registers is None else str(a.registers)
        spills = None if a.spill_stores is None else a.spill_stores + (a.spill_loads or 0)
        facts[f"spill bytes {a.arch}"] = "?" if spills is None else str(spills)
        if a.static_shared_memory:
            facts[f"static shared memory {a.arch}"] = f"{a.static_shared_memory} B"
    return facts


def _allocation_text(a: Allocation) -> str:
    return f"{a.function} {a.buffer}: {a.dtype}, {size_text(a.size)} ({a.scope}, {a.device})"


@dataclass
class ReportDiff:
    """The differences between report a and report b; print it, or to_json() it."""

    a: str
    b: str
    kernel_count: tuple[int, int]
    kernels_added: list[str] = field(default_factory=list)
    kernels_removed: list[str] = field(default_factory=list)
    kernel_changes: list[Change] = field(default_factory=list)
    allocation_count: tuple[int | None, int | None] = (None, None)
    allocation_bytes: tuple[int | str | None, int | str | None] = (None, None)   # a number or an expression
    allocations_added: list[Allocation] = field(default_factory=list)
    allocations_removed: list[Allocation] = field(default_factory=list)
    allocation_changes: list[Change] = field(default_factory=list)
    copy_count: tuple[int | None, int | None] = (None, None)
    model_changes: list[Change] = field(default_factory=list)
    model_per_call: tuple[Any, Any] = (None, None)      # each VM function's per-call totals, in a and in b
    libraries: tuple[str, str] = ("", "")                # the libraries' sha256
    unseen: str | None = None        # the libraries differ where the reports cannot show how: what is missing
    kernel_summaries: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def shown(self) -> bool:
        """Whether the reports show a difference (the libraries' bytes aside)."""
        return bool(self.kernels_added or self.kernels_removed or self.kernel_changes or self.allocations_added
                    or self.allocations_removed or self.allocation_changes
                    or self.allocation_count[0] != self.allocation_count[1]
                    or self.copy_count[0] != self.copy_count[1] or self.model_changes)

    @property
    def changed(self) -> bool:
        return self.shown or self.libraries[0] != self.libraries[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "a": self.a, "b": self.b, "changed": self.changed,
            "kernels": {"count": list(self.kernel_count), "added": self.kernels_added,
                        "removed": self.kernels_removed,
                        "changed": [vars(c) for c in self.kernel_changes]},
            "allocations": {"count": list(self.allocation_count), "bytes": list(self.allocation_bytes),
                            "added": [a.to_json() for a in self.allocations_added],
                            "removed": [a.to_json() for a in self.allocations_removed],
                            "changed": [vars(c) for c in self.allocation_changes]},
            "copies": {"count": list(self.copy_count)},
            "model": {"per_call": list(self.model_per_call), "changed": [vars(c) for c in self.model_changes]},
            "libraries": {"sha256": list(self.libraries), "same": self.libraries[0] == self.libraries[1],
                          "unseen": self.unseen},
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def __str__(self) -> str:
        def count(pair: tuple[Any, Any]) -> str:
            return " -> ".join("?" if v is None else str(v) for v in pair)

        lines = [f"--- {self.a}", f"+++ {self.b}", f"kernels: {count(self.kernel_count)}"]
        lines += [f"  - {self.kernel_summaries.get(n, n)}" for n in self.kernels_removed]
        lines += [f"  + {self.kernel_summaries.get(n, n)}" for n in self.kernels_added]
        lines += [f"  ~ {c.what}: {c.a} -> {c.b}" for c in self.kernel_changes]
        nbytes = " -> ".join("?" if v is None else f"{v} B" for v in self.allocation_bytes)
        lines.append(f"allocations: {count(self.allocation_count)}, bytes {nbytes}")
        lines += [f"  - {_allocation_text(a)}" for a in self.allocations_removed]
        lines += [f"  + {_allocation_text(a)}" for a in self.allocations_added]
        lines += [f"  ~ {c.what}: {c.a} -> {c.b}" for c in self.allocation_changes]
        lines.append(f"copies: {count(self.copy_count)}")
        if self.model_changes:
            lines.append("model memory:")
            lines += [_change(c) for c in self.model_changes]
        if self.unseen:
            lines.append(self.unseen)
        elif not self.changed:
            lines.append("no difference in kernels, launches, allocations, copies or model memory")
        return "\n".join(lines)


def _change(c: Change) -> str:
    if c.a == memory_plan_diff.ABSENT:
        return f"  + {c.what}: {c.b}"
    if c.b == memory_plan_diff.ABSENT:
        return f"  - {c.what}: {c.a}"
    return f"  ~ {c.what}: {c.a} -> {c.b}"


def _unseen(a: Report, b: Report) -> str:
    """What a comparison of two libraries with different bytes cannot see, and how to see it."""
    head = f"the libraries differ (sha256 {a.library.sha256[:12]} -> {b.library.sha256[:12]})"
    if a.host_c is None or b.host_c is None:
        return (f"{head} in what this comparison cannot see without their IR: the host code (launch dimensions, "
                "workspace allocations, copies), spills and the CUDA source; compare the modules (FILE.py:NAME) "
                "or their cache entries (jitflow inspect KEY) to see it")
    return (f"{head} in code the report does not list (the host C or the device code); compare "
            "`--section host` or `--section cuda` of each")


def diff(a: Report, b: Report, a_label: str = "a", b_label: str = "b") -> ReportDiff:
    """Compare two reports; kernels are matched by name, allocations by function and buffer."""
    out = ReportDiff(a_label, b_label, (len(a.kernels), len(b.kernels)))
    ka, kb = {k.name: k for k in a.kernels}, {k.name: k for k in b.kernels}
    out.kernels_removed = [n for n in ka if n not in kb]
    out.kernels_added = [n for n in kb if n not in ka]
    for k in [*(ka[n] for n in out.kernels_removed), *(kb[n] for n in out.kernels_added)]:
        out.kernel_summaries[k.name] = f"{k.name}: grid {dims(k.grid)}, block {dims(k.block)}"
    for name in (n for n in ka if n in kb):
        fa, fb = _kernel_facts(ka[name]), _kernel_facts(kb[name])
        for what in dict.fromkeys([*fa, *fb]):
            if fa.get(what, "-") != fb.get(what, "-"):
                out.kernel_changes.append(Change(f"{name} {what}", fa.get(what, "-"), fb.get(what, "-")))
    ta, tb = a.allocation_totals, b.allocation_totals
    out.allocation_count = (ta.count if ta else None, tb.count if tb else None)
    out.allocation_bytes = (ta.bytes.to_json() if ta else None, tb.bytes.to_json() if tb else None)
    aa = {(x.function, x.buffer): x for x in a.allocations or ()}
    ab = {(x.function, x.buffer): x for x in b.allocations or ()}
    out.allocations_removed = [x for k, x in aa.items() if k not in ab]
    out.allocations_added = [x for k, x in ab.items() if k not in aa]
    for k in (k for k in aa if k in ab):
        xa, xb = aa[k], ab[k]
        for what, va, vb in (("size", size_text(xa.size), size_text(xb.size)), ("dtype", xa.dtype, xb.dtype),
                             ("device", xa.device, xb.device)):
            if va != vb:
                out.allocation_changes.append(Change(f"{k[0]} {k[1]} {what}", va, vb))
    out.copy_count = (None if a.copies is None else len(a.copies), None if b.copies is None else len(b.copies))
    out.model_changes = [Change(*c) for c in memory_plan_diff.model_changes(a.model, b.model)]
    out.model_per_call = (memory_plan_diff.per_call(a.model), memory_plan_diff.per_call(b.model))
    out.libraries = (a.library.sha256, b.library.sha256)
    if out.libraries[0] != out.libraries[1] and not out.shown:
        out.unseen = _unseen(a, b)
    return out
