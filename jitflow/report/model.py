"""The inspection report: what a build runs (host functions, kernels, launches, device allocations,
copies, the fatbin's contents) as plain data with a stable JSON form.

Gathering lives in inspect.py, parsing in host_analysis.py, the text form in report_text.py.
Fields are None where the report cannot know them (a library inspected without its sources).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import InvalidInputError
from . import c_expr
from .c_expr import Expr

if TYPE_CHECKING:
    from .model_memory import ModelMemory

SCHEMA = "jitflow.inspect/1"


def _dims(values: Any) -> tuple[Expr, Expr, Expr]:
    return tuple(Expr.from_json(v) for v in values)  # type: ignore[return-value]


@dataclass(frozen=True)
class HostFunction:
    """A function of the host C: its C name, the name it is exported under (or None), its lines."""

    name: str
    symbol: str
    line: int
    end_line: int


@dataclass(frozen=True)
class Allocation:
    """One device (or host workspace) allocation the host code makes, linked to its line in the host C."""

    function: str
    buffer: str
    scope: str                 # TVM storage scope: "global" for every workspace allocation
    device: str                # "cuda", "cpu", "cuda_host", ...
    dtype: str
    size: Expr                 # bytes: a number, or an expression of the symbols
    line: int
    freed_line: int | None = None

    @property
    def bytes(self) -> int | None:
        return self.size.value

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "buffer": self.buffer, "scope": self.scope, "device": self.device,
                "dtype": self.dtype, "bytes": self.size.value, "size": self.size.text, "line": self.line,
                "freed_line": self.freed_line}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Allocation":
        size = c_expr.constant(d["bytes"]) if d.get("bytes") is not None else c_expr.parse(d["size"])
        return cls(d["function"], d["buffer"], d["scope"], d["device"], d["dtype"], size, d["line"],
                   d.get("freed_line"))


@dataclass(frozen=True)
class Copy:
    """A data copy the generated code performs (a call into the runtime's copy functions)."""

    function: str
    line: int
    call: str                  # the runtime function called, e.g. "runtime.TVMTensorCopyFromTo"
    direction: str             # "host->device", "device->host", or "decided by the tensors at run time"
    args: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "line": self.line, "call": self.call, "direction": self.direction,
                "args": list(self.args)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Copy":
        return cls(d["function"], d["line"], d["call"], d["direction"], tuple(d.get("args", ())))


@dataclass(frozen=True)
class Launch:
    """One kernel launch in the host code: where, with which grid, block and dynamic shared memory."""

    kernel: str
    function: str
    line: int
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    dynamic_shared_memory: Expr
    args: tuple[str, ...] = ()          # what the host passes for the kernel's arguments
    flags: tuple[str, ...] = ()         # other launch parameters (cooperative launch, ...)

    @property
    def threads_per_block(self) -> Expr:
        return c_expr.parse(" * ".join(f"({d.text})" for d in self.block))

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "function": self.function, "line": self.line,
                "grid": [d.to_json() for d in self.grid], "block": [d.to_json() for d in self.block],
                "dynamic_shared_memory": self.dynamic_shared_memory.to_json(), "args": list(self.args),
                "flags": list(self.flags)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Launch":
        return cls(d["kernel"], d["function"], d["line"], _dims(d["grid"]), _dims(d["block"]),
                   Expr.from_json(d["dynamic_shared_memory"]), tuple(d.get("args", ())),
                   tuple(d.get("flags", ())))


@dataclass(frozen=True)
class KernelArg:
    name: str | None           # from the CUDA source, where known
    ctype: str | None          # C type in the CUDA source, e.g. "float*"
    dtype: str                 # what the device module records: "handle64", "int64", ...


@dataclass(frozen=True)
class KernelArch:
    """What one arch's build of a kernel uses; None where neither the fatbin nor the compiler log says."""

    arch: str
    sass: bool                          # the fatbin holds this kernel's machine code for the arch
    registers: int | None = None
    spill_stores: int | None = None     # bytes
    spill_loads: int | None = None      # bytes
    stack_frame: int | None = None      # bytes
    static_shared_memory: int | None = None   # bytes


@dataclass(frozen=True)
class Kernel:
    """A device kernel: its signature, launch parameters, launches and per-arch resource use."""

    name: str
    module: int                         # index of its device module in the library's import tree
    args: tuple[KernelArg, ...]
    launch_params: tuple[str, ...]      # e.g. ("blockIdx.x", "threadIdx.x")
    launch_bounds: int | None = None    # max threads per block the source declares
    launches: tuple[Launch, ...] = ()
    archs: tuple[KernelArch, ...] = ()

    @property
    def grid(self) -> tuple[Expr, Expr, Expr] | None:
        return self.launches[0].grid if self.launches else None

    @property
    def block(self) -> tuple[Expr, Expr, Expr] | None:
        return self.launches[0].block if self.launches else None

    @property
    def dynamic_shared_memory(self) -> Expr | None:
        return self.launches[0].dynamic_shared_memory if self.launches else None

    def arch(self, name: str) -> KernelArch | None:
        return next((a for a in self.archs if a.arch == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "module": self.module, "args": [asdict(a) for a in self.args],
                "launch_params": list(self.launch_params), "launch_bounds": self.launch_bounds,
                "launches": [launch.to_json() for launch in self.launches],
                "archs": {a.arch: {k: v for k, v in asdict(a).items() if k != "arch"} for a in self.archs}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Kernel":
        return cls(d["name"], d["module"], tuple(KernelArg(**a) for a in d["args"]), tuple(d["launch_params"]),
                   d.get("launch_bounds"), tuple(Launch.from_json(x) for x in d.get("launches", ())),
                   tuple(KernelArch(arch=k, **v) for k, v in d.get("archs", {}).items()))


@dataclass(frozen=True)
class FatbinEntry:
    module: int
    kind: str                  # "sass" or "ptx"
    arch: str                  # "sm_90" for SASS, "compute_80" for PTX
    size: int
    isa: str | None = None     # PTX entries: the PTX ISA, e.g. "9.0"


@dataclass(frozen=True)
class Compatibility:
    """Which GPUs and drivers the library's device code serves (see docs/shipping.md)."""

    sass: tuple[str, ...]                 # archs with SASS
    ptx: tuple[tuple[str, str], ...]      # (PTX arch, PTX ISA)
    sass_toolkit: str | None              # CUDA version of the compiler that wrote the SASS
    sass_min_driver: str | None           # oldest driver (CUDA version) that runs the SASS
    ptx_min_driver: str | None            # oldest driver that JIT-compiles the PTX
    min_driver: str | None                # oldest driver that loads all of it
    floor: str | None = None              # the CUDA floor the build promised, where known

    def to_json(self) -> dict[str, Any]:
        return {"sass": list(self.sass), "ptx": [{"arch": a, "isa": i} for a, i in self.ptx],
                "sass_toolkit": self.sass_toolkit, "sass_min_driver": self.sass_min_driver,
                "ptx_min_driver": self.ptx_min_driver, "min_driver": self.min_driver, "floor": self.floor}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Compatibility":
        return cls(tuple(d["sass"]), tuple((p["arch"], p["isa"]) for p in d["ptx"]), d.get("sass_toolkit"),
                   d.get("sass_min_driver"), d.get("ptx_min_driver"), d.get("min_driver"), d.get("floor"))


@dataclass(frozen=True)
class LibraryFacts:
    """The shared library itself: where, how big, for which CPU (and CPU level) and glibc, what it exports."""

    path: str | None
    size: int
    sha256: str
    machine: str
    glibc_baseline: str | None
    exports: tuple[str, ...]
    cpu_level: str | None = None           # the CPU level its digest record states (None: none recorded)
    cpu_needs: tuple[str, ...] = ()        # the CPU features (/proc/cpuinfo names) its code needs


@dataclass(frozen=True)
class AllocationTotals:
    count: int
    bytes: Expr                # the sum: a number, or an expression of the symbols


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

    _COMPARED = ("origin", "library", "target", "key", "build", "functions", "symbols", "kernels",
                 "allocations", "copies", "fatbin", "compatibility", "unknown", "notes", "host_c", "cuda",
                 "host_c_path", "model")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and all(getattr(self, f) == getattr(other, f) for f in self._COMPARED)

    def __str__(self) -> str:
        from .text import render

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
            "functions": None if self.functions is None else [asdict(f) for f in self.functions],
            "symbols": dict(self.symbols),
            "kernels": [k.to_json() for k in self.kernels],
            "allocations": None if self.allocations is None else [a.to_json() for a in self.allocations],
            "allocation_totals": None if totals is None else {"count": totals.count,
                                                              "bytes": totals.bytes.to_json()},
            "copies": None if self.copies is None else [c.to_json() for c in self.copies],
            "fatbin": [asdict(e) for e in self.fatbin],
            "compatibility": None if self.compatibility is None else self.compatibility.to_json(),
            "unknown": list(self.unknown),
            "notes": list(self.notes),
            "host_c_path": self.host_c_path,
            "model": None if self.model is None else self.model.to_json(),
        }
        if sources:
            out["sources"] = {"host_c": self.host_c, "cuda": self.cuda}
        return out

    def to_json(self, sources: bool = True, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(sources), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> "Report":
        """Read back what to_json wrote (PTX and SASS are not part of the JSON)."""
        from .model_memory import ModelMemory

        d = json.loads(text) if isinstance(text, str) else dict(text)
        if d.get("schema") != SCHEMA:
            raise InvalidInputError(f"not a jitflow inspect report (schema {d.get('schema')!r}, expected {SCHEMA})")
        lib = d["library"]
        sources = d.get("sources") or {}
        return cls(
            origin=d["origin"],
            library=LibraryFacts(**{**lib, "exports": tuple(lib["exports"]),
                                    "cpu_needs": tuple(lib.get("cpu_needs", ()))}),
            target=d.get("target"), key=d.get("key"), build=d.get("build"),
            functions=None if d.get("functions") is None else tuple(HostFunction(**f) for f in d["functions"]),
            symbols=dict(d.get("symbols", {})),
            kernels=tuple(Kernel.from_json(k) for k in d.get("kernels", ())),
            allocations=None if d.get("allocations") is None
            else tuple(Allocation.from_json(a) for a in d["allocations"]),
            copies=None if d.get("copies") is None else tuple(Copy.from_json(c) for c in d["copies"]),
            fatbin=tuple(FatbinEntry(**e) for e in d.get("fatbin", ())),
            compatibility=Compatibility.from_json(d["compatibility"]) if d.get("compatibility") else None,
            unknown=tuple(d.get("unknown", ())), notes=tuple(d.get("notes", ())),
            host_c=sources.get("host_c"), cuda=sources.get("cuda"), host_c_path=d.get("host_c_path"),
            model=None if d.get("model") is None else ModelMemory.from_json(d["model"]),
        )

