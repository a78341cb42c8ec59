"""Read TVM's generated host C: its functions, the workspace allocations it makes, the kernels it
launches (with grid, block and dynamic shared memory) and the copies it calls.

Everything comes from the lowered code itself. The patterns are those of TVM's C host codegen:
`TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code, dtype_bits)`, a packed
function looked up by name (`TVMFFIEnvModLookupFromImports(ctx, "main_kernel", &handle)`) and
called as `TVMFFIFunctionCall(handle, stack, n, &result)` after its arguments were stored in the
stack slots; a kernel's call passes its arguments, then one value per launch parameter tag of
the device module's function info (blockIdx.x, threadIdx.x, ..., dynamic shared memory).
A host function split in two (its entry calling `jitflow_compute_f`, which follows it; see
formats/compute_functions.py) is read as one: the compute part's lines belong to the entry, and
its parameters mean what the entry passed. So are its parallel bodies (`jitflow_parallel_f_k`,
formats/parallel_functions.py, after the function that launches them): a call of
`jitflow_launch_f_k` is a parallel launch on TVM's thread pool, whose loops are read from the body
(both forms of chunks: pieces the tasks claim, `for (i = begin; i < jitflow_claim_end_*(extent,
begin, num_task); ...)`, and a chunk per task, `for (i = jitflow_chunk_begin_*(extent, task_id,
num_task); ...)`; a stride: `for (i = task_id; i < extent; i += num_task)`) with their extents in
the launching function's terms. The C host's other functions (`jitflow_*`: the prelude's helpers,
the launches' glue) are not host functions and are skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..formats.library_blob import KernelInfo
from ..formats.vm_walk import DEVICE_TYPES
from ..formats import c_expr, compute_functions, parallel_functions
from ..formats.c_expr import Expr
from .types import Allocation, Copy, HostFunction, Launch, ParallelLaunch, ParallelLoop

_FUNC = re.compile(r"^(?!if\b|for\b|while\b|else\b|switch\b|return\b)[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;]*\)\s*\{\s*$")
_DECL = re.compile(r"^\s*(?:const\s+)?(?:[A-Za-z_]\w*\s*\**\s+)?\**(\w+)\s*=(?!=)\s*(.+?);\s*$")
_SHAPE = re.compile(r"^\s*int64_t\*\s*(\w+)\s*=\s*\(int64_t\*\)\(\(\(DLTensor\*\)(\w+?)_handle\)\[0\]\.shape\);")
_SHAPE_READ = re.compile(r"\(\(int64_t\*\)(\w+)\)\[(\d+)\]")
_SCALAR_ARG = re.compile(r"\(\(TVMFFIAny\*\)args\)\[(\d+)\]\.v_int64")
_LOOKUP = re.compile(r"\b(?:TVMFFIEnv\w*Lookup\w*|TVMBackendGetFuncFromEnv)\("
                     r"\s*[\w.]+\s*,\s*\"([^\"]+)\"\s*,\s*&(\w+)\)")
_STACK_SET = re.compile(r"^\s*\(\(\(TVMFFIAny\*\)(\w+)\)\[(\d+)\]\.(v_\w+)\)\s*=\s*(.+?);\s*$")
_CALL = re.compile(r"\bTVMFFIFunctionCall\(\s*(\w+)\s*,\s*\(TVMFFIAny\*\)\s*(\w+)\s*,\s*(\d+)\s*,")
_FREE = re.compile(r"\bTVMBackendFreeWorkspace\(\s*(\d+)\s*,[^,]+,\s*(\w+)\s*\)")
_ALLOC = "TVMBackendAllocWorkspace("
_DEVICE_COPY = "TVMDeviceCopyDataFromTo("
_PARALLEL_LAUNCH = re.compile(rf"\b{parallel_functions.LAUNCH}(\w+)\(")
_CHUNK_LOOP = re.compile(rf"^\s*for \([^;=]*?(\w+) = (?:.*?\b({parallel_functions.CHUNK_BEGIN}\w+)\("
                         rf"|[^;]*; \1 < ({parallel_functions.CLAIM_END}\w+)\()")
_STRIDE_LOOP = re.compile(r"^\s*for \([^;=]*?(\w+) = [^;]*; (\w+) < (.+); (\w+) \+= (.+)\) \{\s*$")
_BARRIER = parallel_functions.BARRIER + "("
_OWN = "jitflow_"

_DTYPE_CODES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat"}
_COPY_DIRECTIONS = {"tensorcopyfrombytes": "host->device", "tensorcopytobytes": "device->host"}
RUNTIME_DIRECTION = "decided by the tensors' devices at run time"
_GRID = {"blockIdx.x": 0, "blockIdx.y": 1, "blockIdx.z": 2}
_BLOCK = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


@dataclass(frozen=True)
class PackedCall:
    """A call of a packed function by name: the callee, the argument texts, where it is."""

    callee: str
    function: str
    line: int
    args: tuple[Expr, ...]


@dataclass
class HostCode:
    """What the host C does: functions, allocations, kernel launches, copies, other packed calls."""

    functions: list[HostFunction] = field(default_factory=list)
    symbols: dict[str, str] = field(default_factory=dict)
    allocations: list[Allocation] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    calls: list[PackedCall] = field(default_factory=list)
    parallel: list[ParallelLaunch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def call_args(text: str, start: int) -> list[str]:
    """The top-level comma-separated arguments of the call whose '(' is at text[start]."""
    depth, current, out = 0, [], []
    for ch in text[start:]:
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                out.append("".join(current).strip())
                return out
        elif ch == "," and depth == 1:
            out.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    return out


def _dtype(code: Expr, bits: Expr) -> str:
    if code.value is None or bits.value is None:
        return "unknown"
    return f"{_DTYPE_CODES.get(code.value, f'code{code.value}')}{bits.value}"


def _part_of(c_name: str) -> str | None:
    """The TIR function a compute part or a parallel body belongs to; None for other C names."""
    if c_name.startswith(compute_functions.PREFIX):
        return compute_functions.entry_of(c_name)
    return parallel_functions.function_of(c_name) if c_name.startswith(parallel_functions.BODY) else None


def _exported_name(c_name: str) -> str:
    entry = _part_of(c_name)
    if entry is not None:
        return entry
    return c_name[len("__tvm_ffi_"):] if c_name.startswith("__tvm_ffi_") else c_name


def _parameters(header: str) -> list[str]:
    """The parameter names of a C function definition's first line."""
    inside = header[header.index("(") + 1:header.rindex(")")]
    return [p.split()[-1].lstrip("*") for p in inside.split(",") if p.strip()]


class _Scanner:
    """One pass over the host C, function by function."""

    def __init__(self, kernels: Mapping[str, KernelInfo]) -> None:
        self.kernels = kernels
        self.out = HostCode()
        self.handles: dict[str, str] = {}          # static handle variable -> looked-up name
        self.function: str | None = None
        self.start = 0
        self.definitions: dict[str, str] = {}      # local name -> C text of its value
        self.shape_arrays: dict[str, str] = {}     # main_A_shape -> "A"
        self.stacks: dict[str, dict[int, str]] = {}
        self.compute_calls: dict[str, tuple[list[str], dict[str, str], dict[str, str]]] = {}
        self.launches: dict[str, dict] = {}        # body -> what is known of its launch so far
        self.skipping = False                      # in one of the C host's own functions
        self.task: tuple[str, str] | None = None   # in a parallel body: its task id and task count

    def scan(self, host_c: str) -> HostCode:
        for number, line in enumerate(host_c.splitlines(), 1):
            if self.function is None and not self.skipping:
                m = _FUNC.match(line)
                if m and not line.startswith("#"):
                    self._enter(m.group(1), number, line)
                continue
            if line.startswith("}"):
                if self.skipping:
                    self.skipping = False
                else:
                    self._leave(number)
                continue
            if not self.skipping:
                self._line(line, number)
        self.out.parallel = [self._parallel(body, x) for body, x in self.launches.items()]
        return self.out

    def _parallel(self, body: str, x: dict) -> ParallelLaunch:
        return ParallelLaunch(x["name"], x["function"], x["line"], body, x.get("body_line"), tuple(x["loops"]),
                              x["barriers"], x["args"])

    def _enter(self, name: str, number: int, header: str) -> None:
        if name.startswith(_OWN) and _part_of(name) is None:
            self.skipping = True
            return
        self.function, self.start = name, number
        self.definitions, self.shape_arrays, self.stacks = {}, {}, {}
        params = _parameters(header)
        body = name.startswith(parallel_functions.BODY)
        self.task = (params[0], params[1]) if body and len(params) >= len(parallel_functions.LEADING) else None
        if body and name in self.launches:
            self.launches[name]["body_line"] = number
            params = params[len(parallel_functions.LEADING):]
        called = self.compute_calls.get(name) if _part_of(name) else None
        if called is not None:       # a compute part or a body: its parameters are what its caller passed
            args, definitions, shape_arrays = called
            self.definitions = dict(definitions)
            for param, arg in zip(params, args):
                if arg in shape_arrays:
                    self.shape_arrays[param] = shape_arrays[arg]
                elif param != arg:
                    self.definitions[param] = arg

    def _leave(self, number: int) -> None:
        name = _exported_name(self.function or "")
        functions = self.out.functions
        if _part_of(self.function or "") and functions and functions[-1].name == name:
            functions[-1] = HostFunction(name, functions[-1].symbol, functions[-1].line, number)
        else:
            functions.append(HostFunction(name, self.function or "", self.start, number))
        self.function, self.task = None, None

    @property
    def fname(self) -> str:
        return _exported_name(self.function or "")

    def expr(self, text: str) -> Expr:
        return c_expr.parse(text, self.definitions)

    def _line(self, line: str, number: int) -> None:
        for callee, paren in compute_functions.calls(line) if compute_functions.PREFIX in line else ():
            self.compute_calls[callee] = (call_args(line, paren), self.definitions, self.shape_arrays)
        if parallel_functions.LAUNCH in line:
            self._parallel_launch(line, number)
        if self.task is not None and "for (" in line:
            self._loop(line)
        if self.task is not None and _BARRIER in line and self.function in self.launches:
            self.launches[self.function]["barriers"] += 1
        for m in _LOOKUP.finditer(line):
            self.handles[m.group(2)] = m.group(1)
        m = _STACK_SET.match(line)
        if m:
            self.stacks.setdefault(m.group(1), {})[int(m.group(2))] = m.group(4)
            return
        m = _SHAPE.match(line)
        if m:
            self.shape_arrays[m.group(1)] = m.group(2)
            return
        if _ALLOC in line:
            self._allocation(line, number)
        elif _DEVICE_COPY in line:
            args = call_args(line, line.index(_DEVICE_COPY) + len(_DEVICE_COPY) - 1)
            self.out.copies.append(Copy(self.fname, number, "TVMDeviceCopyDataFromTo", RUNTIME_DIRECTION,
                                        tuple(self.expr(a).text for a in args)))
        m = _FREE.search(line)
        if m:
            self._free(m.group(2), number)
        m = _CALL.search(line)
        if m:
            self._call(m.group(1), m.group(2), int(m.group(3)), number)
            return
        m = _DECL.match(line)
        if m and not line.lstrip().startswith(("if", "return", "(")):
            self._definition(m.group(1), m.group(2))

    def _parallel_launch(self, line: str, number: int) -> None:
        """A call of a parallel launch's launcher: the launch, and what its body's parameters mean."""
        for m in _PARALLEL_LAUNCH.finditer(line):
            args = call_args(line, m.end() - 1)
            body = parallel_functions.BODY + m.group(1)
            self.compute_calls[body] = (args, self.definitions, self.shape_arrays)
            self.launches[body] = {"name": m.group(1), "function": self.fname, "line": number, "loops": [],
                                   "barriers": 0, "args": tuple(self.expr(a).text for a in args)}

    def _loop(self, line: str) -> None:
        """A loop of a parallel body that the tasks share: a chunk each, or a stride."""
        launch = self.launches.get(self.function or "")
        task_id, num_task = self.task or ("", "")
        m = _CHUNK_LOOP.match(line)
        if m and launch is not None:
            extent = call_args(line, m.end() - 1)[0]
            launch["loops"].append(ParallelLoop(m.group(1), self.expr(extent), "chunks"))
            return
        m = _STRIDE_LOOP.match(line)
        if m and launch is not None and m.group(1) == m.group(2) == m.group(4) \
                and re.search(rf"\b{num_task}\b", m.group(5)) and task_id in line.split(";", 1)[0]:
            launch["loops"].append(ParallelLoop(m.group(1), self.expr(m.group(3)), "stride"))

    def _definition(self, name: str, value: str) -> None:
        read = _SHAPE_READ.search(value)
        if read and read.group(1) in self.shape_arrays and not c_expr.clean(
                value.replace(read.group(0), "")).strip("() "):
            self.out.symbols[name] = f"{self.shape_arrays[read.group(1)]}.shape[{read.group(2)}]"
            self.definitions.pop(name, None)
            return
        arg = _SCALAR_ARG.search(value)
        if arg and not c_expr.clean(value.replace(arg.group(0), "")).strip("() "):
            self.out.symbols[name] = f"{self.fname} argument #{arg.group(1)}"
            self.definitions.pop(name, None)
            return
        if name not in self.out.symbols:
            self.definitions[name] = value

    def _allocation(self, line: str, number: int) -> None:
        at = line.index(_ALLOC)
        args = call_args(line, at + len(_ALLOC) - 1)
        target = re.search(r"(\w+)\s*=[^=]*$", line[:at])
        if len(args) != 5:
            self.out.problems.append(f"host.c:{number}: unexpected workspace allocation call: {line.strip()}")
            return
        device, _dev_id, nbytes, code, bits = args
        dev = self.expr(device)
        self.out.allocations.append(Allocation(
            function=self.fname, buffer=target.group(1) if target else "(unnamed)", scope="global",
            device=DEVICE_TYPES.get(dev.value, f"device type {dev.text}") if dev.value is not None else dev.text,
            dtype=_dtype(self.expr(code), self.expr(bits)), size=self.expr(nbytes), line=number))

    def _free(self, buffer: str, number: int) -> None:
        for i in range(len(self.out.allocations) - 1, -1, -1):
            a = self.out.allocations[i]
            if a.function == self.fname and a.buffer == buffer and a.freed_line is None:
                self.out.allocations[i] = Allocation(a.function, a.buffer, a.scope, a.device, a.dtype, a.size,
                                                     a.line, number)
                return

    def _call(self, handle: str, stack: str, count: int, number: int) -> None:
        callee = self.handles.get(handle, handle)
        slots = self.stacks.get(stack, {})
        args = tuple(self.expr(slots.get(i, "?")) for i in range(count))
        info = self.kernels.get(callee)
        if info is not None:
            self.out.launches.append(self._launch(info, args, number))
            return
        if "copy" in callee.lower():
            key = callee.lower().rsplit(".", 1)[-1].replace("tvm", "", 1)
            self.out.copies.append(Copy(self.fname, number, callee, _COPY_DIRECTIONS.get(key, RUNTIME_DIRECTION),
                                        tuple(a.text for a in args)))
            return
        self.out.calls.append(PackedCall(callee, self.fname, number, args))

    def _launch(self, info: KernelInfo, args: Sequence[Expr], number: int) -> Launch:
        n_args = len(info.arg_types)
        if len(args) != n_args + len(info.launch_params):
            self.out.problems.append(
                f"host.c:{number}: {info.name} is called with {len(args)} values; its function info has "
                f"{n_args} arguments and {len(info.launch_params)} launch parameters")
        one = c_expr.constant(1)
        grid, block, dyn, flags = [one, one, one], [one, one, one], c_expr.constant(0), []
        for tag, value in zip(info.launch_params, args[n_args:]):
            if tag in _GRID:
                grid[_GRID[tag]] = value
            elif tag in _BLOCK:
                block[_BLOCK[tag]] = value
            elif tag.endswith("use_dyn_shared_memory"):
                dyn = value
            else:
                flags.append(tag)
        return Launch(info.name, self.fname, number, tuple(grid), tuple(block), dyn,  # type: ignore[arg-type]
                      tuple(a.text for a in args[:n_args]), tuple(flags))


def analyze(host_c: str, kernels: Sequence[KernelInfo] = ()) -> HostCode:
    """Parse the host C; `kernels` (from the device modules' function info) says which calls launch."""
    return _Scanner({k.name: k for k in kernels}).scan(host_c)
