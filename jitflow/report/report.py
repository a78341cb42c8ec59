"""The Report: everything `inspect` found about one library, its JSON form, and its text (the
sections of text.py and memory_plan_text.py put together).

gather.py makes a Report; diff.py compares two.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import InvalidInputError
from ..files import export_path
from ..formats import c_expr, chrome_trace
from . import evaluate, memory_plan_text, page, text, timeline
from .memory_plan import ModelMemory
from .types import (
    Allocation,
    AllocationTotals,
    Compatibility,
    Copy,
    FatbinEntry,
    HostFunction,
    Kernel,
    Launch,
    LibraryFacts,
    ParallelLaunch,
)

SCHEMA = "jitflow.inspect/2"
#: the schemas from_json reads: this one, and /1 (written before lifetimes and peaks)
READS = (SCHEMA, "jitflow.inspect/1")


@dataclass(eq=False)
class Report:
    """Everything `inspect` found; print it for a summary, `to_json()` for scripts."""

    origin: str                                    # "build", "cache-entry" or "library"
    library: LibraryFacts
    target: dict[str, Any] | None = None           # kind, archs, host, cuda_compiler
    key: str | None = None
    build: str | None = None                       # how the library was obtained (hit, built ...)
    functions: tuple[HostFunction, ...] | None = None
    symbols: dict[str, str] = field(default_factory=dict)   # shape symbol -> where it comes from
    kernels: tuple[Kernel, ...] = ()
    allocations: tuple[Allocation, ...] | None = None
    copies: tuple[Copy, ...] | None = None
    parallel: tuple[ParallelLaunch, ...] | None = None    # launches on TVM's thread pool (None: no host code)
    fatbin: tuple[FatbinEntry, ...] = ()
    compatibility: Compatibility | None = None     # GPUs and drivers the device code serves
    unknown: tuple[str, ...] = ()                  # what this report cannot know, and why
    notes: tuple[str, ...] = ()
    host_c: str | None = field(default=None, repr=False)
    cuda: str | None = field(default=None, repr=False)
    host_c_path: str | None = None
    ptx: Mapping[str, str] = field(default_factory=dict, repr=False)    # arch -> PTX (made on access)
    sass: Mapping[str, str] = field(default_factory=dict, repr=False)   # arch -> SASS (where tools exist)
    model: ModelMemory | None = None               # a Relax model's memory per call and at start-up
    shape: dict[str, int] = field(default_factory=dict)     # the shape symbols evaluate() bound: {"n": 32}

    _COMPARED = ("origin", "library", "target", "key", "build", "functions", "symbols", "kernels",
                 "allocations", "copies", "parallel", "fatbin", "compatibility", "unknown", "notes", "host_c", "cuda",
                 "host_c_path", "model", "shape")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and all(getattr(self, f) == getattr(other, f) for f in self._COMPARED)

    def __str__(self) -> str:
        return render(self)

    @property
    def launches(self) -> tuple[Launch, ...]:
        """Every kernel launch, in host code order."""
        return tuple(sorted((x for k in self.kernels for x in k.launches), key=lambda x: (x.function, x.line)))

    @property
    def allocation_totals(self) -> AllocationTotals | None:
        if self.allocations is None:
            return None
        total = c_expr.parse(" + ".join(f"({a.size.text})" for a in self.allocations) or "0")
        return AllocationTotals(len(self.allocations), total)

    @property
    def shape_symbols(self) -> list[str]:
        """The shape symbols its sizes depend on and not bound yet (what evaluate() binds)."""
        known = evaluate.symbols_in(self) | set(self.symbols) | set(self.model.symbols if self.model else ())
        return sorted(known - set(self.shape))

    def evaluate(self, **shape: int) -> "Report":
        """A new report with these shape symbols bound (n=32): every size, total, peak and launch
        dimension that depends only on them becomes a number; the others stay expressions. The new
        report says the shape (`rep.shape`) in its text, JSON, page and timeline."""
        evaluate.check_names(shape, self.shape_symbols, self.shape)
        bound = evaluate.bind(self, shape)
        bound.shape = {**self.shape, **shape}
        return bound

    @property
    def at(self) -> str:
        """' at n = 32' for a report evaluated at a shape, else ''."""
        return f" at {text.shape_text(self.shape)}" if self.shape else ""

    @property
    def name(self) -> str:
        """A short name: the cache key's first digits, else the library's file name."""
        return self.key[:12] if self.key else os.path.basename(self.library.path or self.origin)

    @property
    def device(self) -> str:
        """Where its kernels and workspaces run: "cuda" or "cpu"."""
        if self.model is not None:
            return self.model.devices[0]
        return "cuda" if (self.target or {}).get("kind") == "cuda" or self.kernels else "cpu"

    def timeline(self, path: str | os.PathLike | None = None) -> dict[str, Any] | Path:
        """The memory plan as Chrome trace events (Perfetto, chrome://tracing): the document, or,
        with `path`, the path it was written to (as export_library returns). Sizes must be numbers:
        evaluate() a symbolic model at a shape first."""
        if self.model is not None:
            doc = timeline.model_document(self.model, self.name, self.shape)
        else:
            doc = timeline.host_document(self._host_functions(), self.allocations or (), self.launches, self.device,
                                         self.name, self.shape)
        if path is not None:
            return write_file(path, chrome_trace.dumps(doc), "rep.timeline", "the timeline", "plan.json")
        return doc

    def plans(self, label: str = "") -> list[page.Plan]:
        """What the picture draws: one plan per VM function (per host function with workspaces or
        launches for a library of kernels)."""
        if self.model is not None:
            return [page.of_function(f, label) for f in self.model.functions]
        return [page.of_host(f, self.allocations or (), self.launches, self.device, label)
                for f in self._host_functions()
                if any(a.function == f.name for a in self.allocations or ()) or
                any(x.function == f.name for x in self.launches)]

    def svg(self) -> str:
        """The picture of the plan as one SVG image."""
        return page.svg(self.plans())

    def html(self, path: str | os.PathLike | None = None) -> str | Path:
        """A self-contained page with the picture and the report's text: the page, or, with `path`,
        the path it was written to (as export_library returns)."""
        doc = page.document(f"jitflow inspect: {self.name}{self.at}", self.plans(), render(self))
        if path is not None:
            return write_file(path, doc, "rep.html", "the page", "plan.html")
        return doc

    def _host_functions(self) -> tuple[HostFunction, ...]:
        if self.functions is None:
            raise InvalidInputError("this report has no host code (a library inspected without its sources): "
                                    "there is no plan to draw; inspect the module or its cache entry")
        return self.functions

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise InvalidInputError(f"no kernel named {name!r}; kernels: {', '.join(k.name for k in self.kernels)}")

    def host_line(self, line: int) -> str:
        """The text of a host C line (1-based), to follow an allocation or launch back to the code."""
        if self.host_c is None:
            raise InvalidInputError("this report has no host C (a library inspected without its sources)")
        lines = self.host_c.splitlines()
        if not 1 <= line <= len(lines):
            raise InvalidInputError(f"host C has {len(lines)} lines, not {line}")
        return lines[line - 1]

    # ---- JSON -------------------------------------------------------------------------------
    def to_dict(self, sources: bool = True) -> dict[str, Any]:
        """The JSON-ready form (see docs/inspect.md); sources=False leaves out the host C and CUDA text."""
        totals = self.allocation_totals
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "origin": self.origin,
            "library": {**asdict(self.library), "exports": list(self.library.exports),
                        "cpu_needs": list(self.library.cpu_needs)},
            "target": self.target,
            "key": self.key,
            "build": self.build,
            "functions": None if self.functions is None else [f.to_json() for f in self.functions],
            "symbols": dict(self.symbols),
            "kernels": [k.to_json() for k in self.kernels],
            "allocations": None if self.allocations is None else [a.to_json() for a in self.allocations],
            "allocation_totals": None if totals is None else {"count": totals.count,
                                                              "bytes": totals.bytes.to_json()},
            "copies": None if self.copies is None else [c.to_json() for c in self.copies],
            "parallel_launches": None if self.parallel is None else [x.to_json() for x in self.parallel],
            "fatbin": [asdict(e) for e in self.fatbin],
            "compatibility": None if self.compatibility is None else self.compatibility.to_json(),
            "unknown": list(self.unknown),
            "notes": list(self.notes),
            "host_c_path": self.host_c_path,
            "model": None if self.model is None else self.model.to_json(),
            "shape": dict(self.shape),
        }
        if sources:
            out["sources"] = {"host_c": self.host_c, "cuda": self.cuda}
        return out

    def to_json(self, sources: bool = True, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(sources), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> "Report":
        """Read back what to_json wrote (PTX and SASS are not part of the JSON)."""
        d = json.loads(text) if isinstance(text, str) else dict(text)
        if d.get("schema") not in READS:
            raise InvalidInputError(f"not a jitflow inspect report (schema {d.get('schema')!r}, expected "
                                    f"{' or '.join(READS)})")
        lib = d["library"]
        sources = d.get("sources") or {}
        return cls(
            origin=d["origin"],
            library=LibraryFacts(**{**lib, "exports": tuple(lib["exports"]),
                                    "cpu_needs": tuple(lib.get("cpu_needs", ()))}),
            target=d.get("target"), key=d.get("key"), build=d.get("build"),
            functions=None if d.get("functions") is None else tuple(HostFunction.from_json(f) for f in d["functions"]),
            symbols=dict(d.get("symbols", {})),
            kernels=tuple(Kernel.from_json(k) for k in d.get("kernels", ())),
            allocations=None if d.get("allocations") is None
            else tuple(Allocation.from_json(a) for a in d["allocations"]),
            copies=None if d.get("copies") is None else tuple(Copy.from_json(c) for c in d["copies"]),
            parallel=None if d.get("parallel_launches") is None
            else tuple(ParallelLaunch.from_json(x) for x in d["parallel_launches"]),
            fatbin=tuple(FatbinEntry(**e) for e in d.get("fatbin", ())),
            compatibility=Compatibility.from_json(d["compatibility"]) if d.get("compatibility") else None,
            unknown=tuple(d.get("unknown", ())), notes=tuple(d.get("notes", ())),
            host_c=sources.get("host_c"), cuda=sources.get("cuda"), host_c_path=d.get("host_c_path"),
            model=None if d.get("model") is None else ModelMemory.from_json(d["model"]),
            shape={k: int(v) for k, v in (d.get("shape") or {}).items()},
        )


def write_file(path: str | os.PathLike, text: str, what: str, written: str, example: str,
               inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Write `text` at `path` as export_library writes a library (files/export_path.py): refused where a
    folder, a FIFO, a device or one of `inputs` is at that name, written through a temporary file
    renamed into place. `what` names the writer in errors, `written` what it writes."""
    dest = export_path.destination(path, inputs, what=what, written=written, example=example)
    export_path.write_atomically(dest, text, what)
    return dest


def plans_svg(reports: Sequence[tuple[str, Report]]) -> str:
    """The plans of several reports (label, report) drawn one above the other on one scale: the
    picture of a --diff, as one SVG image."""
    return page.svg([p for label, rep in reports for p in rep.plans(f"{label}: " if label else "")])


def header(rep: Report) -> list[str]:
    """The target, how the library was obtained, the library itself, its fatbin and symbols."""
    return text.header_lines(rep.target, rep.build, rep.library, rep.fatbin, rep.compatibility, rep.symbols,
                             rep.shape)


def kernels_section(rep: Report) -> list[str]:
    return text.kernels_section(rep.kernels)


def memory_section(rep: Report) -> list[str]:
    """A model's memory plan, or a library of kernels' allocations and copies."""
    if rep.model is not None:
        return (memory_plan_text.model_section(rep.model, rep.shape)
                + (text.host_copies(rep.copies) if rep.copies else []))
    return text.allocations_section(rep.allocations, rep.allocation_totals, rep.copies)


def host_section(rep: Report) -> list[str]:
    return text.host_section(rep.functions, rep.allocations, rep.launches, rep.copies, rep.parallel)


#: How the sources are named: as attributes of the report (Python) or as `jitflow inspect` options.
_SOURCE_NAMES = {"python": {"host": "rep.host_c", "cuda": "rep.cuda", "ptx": "rep.ptx[{}]", "sass": "rep.sass[{}]"},
                 "cli": {"host": "--section host", "cuda": "--section cuda", "ptx": "--section ptx ({})",
                         "sass": "--section sass ({})"}}


def render(rep: Report, names: str = "python") -> str:
    """The report as text; `names` "cli" names its sources as `jitflow inspect` options."""
    said = _SOURCE_NAMES[names]
    lines = [f"jitflow inspect: {rep.origin}" + (f" {rep.key[:12]}" if rep.key else "") + rep.at]
    lines += header(rep)
    for section in (host_section(rep), kernels_section(rep), memory_section(rep)):
        if section:
            lines += [""] + section
    sources = []
    if rep.host_c is not None:
        sources.append(f"{said['host']} ({len(rep.host_c.splitlines())} lines"
                       + (f", {rep.host_c_path})" if rep.host_c_path else ")"))
    if rep.cuda is not None:
        sources.append(f"{said['cuda']} ({len(rep.cuda.splitlines())} lines)")
    if len(rep.ptx):
        sources.append(said["ptx"].format(", ".join(rep.ptx)))
    if len(rep.sass):
        sources.append(said["sass"].format(", ".join(rep.sass)))
    if sources:
        lines += ["", "sources: " + "; ".join(sources)]
    if rep.notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in rep.notes]
    if rep.unknown:
        lines += ["", "not known here:"] + [f"  - {u}" for u in rep.unknown]
    return "\n".join(lines)
