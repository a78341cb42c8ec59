"""The parts of an inspection report, as plain data with a stable JSON form: host functions, kernels
and their launches, parallel launches on TVM's thread pool, device allocations, copies, the fatbin's
entries, the library itself.

The Report that holds them is in report.py, their text in text.py; host_code.py reads them from the
host C and gather.py puts a Report together. Fields are None where the report cannot know them (a
library inspected without its sources).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ..formats import c_expr
from ..formats.c_expr import Expr


def _dims(values: Any) -> tuple[Expr, Expr, Expr]:
    return tuple(Expr.from_json(v) for v in values)  # type: ignore[return-value]


def size_or_none(value: Any) -> Expr | None:
    """A size read back from JSON (a number or an expression), or None."""
    return None if value is None else Expr.from_json(value)


@dataclass(frozen=True)
class HostFunction:
    """A function of the host C: its C name, the name it is exported under (or None), its lines, and
    the most workspace bytes one call holds at once (None where unknown)."""

    name: str
    symbol: str
    line: int
    end_line: int
    peak: Expr | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "symbol": self.symbol, "line": self.line, "end_line": self.end_line,
                "peak_bytes": None if self.peak is None else self.peak.value,
                "peak": None if self.peak is None else self.peak.text}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "HostFunction":
        peak = d.get("peak_bytes") if d.get("peak_bytes") is not None else d.get("peak")
        return cls(d["name"], d["symbol"], d["line"], d["end_line"], size_or_none(peak))


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
    position: int | None = None     # in a model's calls: the bytecode position of the VM call that runs it

    @property
    def bytes(self) -> int | None:
        return self.size.value

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "buffer": self.buffer, "scope": self.scope, "device": self.device,
                "dtype": self.dtype, "bytes": self.size.value, "size": self.size.text, "line": self.line,
                "freed_line": self.freed_line, "position": self.position}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Allocation":
        size = c_expr.constant(d["bytes"]) if d.get("bytes") is not None else c_expr.parse(d["size"])
        return cls(d["function"], d["buffer"], d["scope"], d["device"], d["dtype"], size, d["line"],
                   d.get("freed_line"), d.get("position"))


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
    position: int | None = None         # in a model's calls: the bytecode position of the VM call that runs it
    replayed: bool = False              # in a model's calls: replayed from a captured CUDA graph

    @property
    def threads_per_block(self) -> Expr:
        return c_expr.parse(" * ".join(f"({d.text})" for d in self.block))

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "function": self.function, "line": self.line,
                "grid": [d.to_json() for d in self.grid], "block": [d.to_json() for d in self.block],
                "dynamic_shared_memory": self.dynamic_shared_memory.to_json(), "args": list(self.args),
                "flags": list(self.flags), "position": self.position, "replayed": self.replayed}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Launch":
        return cls(d["kernel"], d["function"], d["line"], _dims(d["grid"]), _dims(d["block"]),
                   Expr.from_json(d["dynamic_shared_memory"]), tuple(d.get("args", ())),
                   tuple(d.get("flags", ())), d.get("position"), bool(d.get("replayed")))


@dataclass(frozen=True)
class ParallelLoop:
    """One parallel loop of a parallel launch: its variable, its extent (iterations: a number or an
    expression of the symbols), and how the tasks share it: "chunks" (task t of n owns the t-th of n
    contiguous chunks; in a launch that is one loop, a task that is done takes pieces of the chunks
    of tasks that are behind) or "stride" (task t runs iterations t, t + n, ...)."""

    var: str
    extent: Expr
    schedule: str

    def to_json(self) -> dict[str, Any]:
        return {"var": self.var, "extent": self.extent.to_json(), "schedule": self.schedule}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ParallelLoop":
        return cls(d["var"], Expr.from_json(d["extent"]), d["schedule"])


@dataclass(frozen=True)
class ParallelLaunch:
    """One launch of parallel loops on TVM's thread pool (TVMBackendParallelLaunch, one task per
    thread of the pool): where the host function launches it, its body function and the line that
    defines it, the loops the tasks share, the barriers between them, the values passed to the body."""

    name: str                            # the launch's name, `f_k` (formats/parallel_functions.py)
    function: str
    line: int
    body: str                            # the C function each task runs
    body_line: int | None = None
    loops: tuple[ParallelLoop, ...] = ()
    barriers: int = 0
    args: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "function": self.function, "line": self.line, "body": self.body,
                "body_line": self.body_line, "loops": [x.to_json() for x in self.loops],
                "barriers": self.barriers, "args": list(self.args)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ParallelLaunch":
        return cls(d["name"], d["function"], d["line"], d["body"], d.get("body_line"),
                   tuple(ParallelLoop.from_json(x) for x in d.get("loops", ())), int(d.get("barriers", 0)),
                   tuple(d.get("args", ())))


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
