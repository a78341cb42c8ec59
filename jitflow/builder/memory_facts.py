"""Memory facts at build time, from the IR: what each call of a Relax function and of a TIR host
function allocates, when each block is alive, and the peak, simplified by TVM's arithmetic.

While TVM lowers, an instrument keeps two modules (observing()): the Relax module that VM code
generation is about to receive (the input of VMShapeLower: storage sizes and tensor shapes are still
expressions of the shape symbols there) and the host TIR after LowerTVMBuiltin (each workspace's
TVMBackendAllocWorkspace with its size, and its free). collect() joins them with the bytecode the
build produced (formats/vm_walk.py: lifetimes, CUDA graphs folded in), and every size, total and
peak is simplified with tvm.sym.Analyzer (shape symbols are never negative). write() stores the
record (formats/memory_facts.py) as memory.json and as a section of the library.
"""
from __future__ import annotations

import ast
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ..formats import c_expr, elf_object, lifetimes, library_blob, memory_facts, vm_program, vm_walk
from ..formats.c_expr import Expr
from ..formats.memory_facts import HostFacts, MemoryFacts, StorageFact, VMFacts, Workspace
from ..formats.vm_walk import IRSizes

_EXPORT = "__tvm_ffi_"
_ALLOC, _FREE = "TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace"


class Captured:
    """What the instrument kept: the Relax module before VMShapeLower, the host TIR functions."""

    def __init__(self) -> None:
        self.relax: Any = None
        self.host: dict[str, Any] = {}


def _instrument(seen: Captured) -> Any:
    import tvm

    @tvm.instrument.pass_instrument
    class KeepIR:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name == "VMShapeLower":
                seen.relax = mod

        def run_after_pass(self, mod: Any, info: Any) -> None:
            if info.name.endswith("LowerTVMBuiltin"):
                for gv, func in mod.functions.items():
                    symbol = str((func.attrs or {}).get("global_symbol", gv.name_hint))
                    seen.host[symbol[len(_EXPORT):] if symbol.startswith(_EXPORT) else symbol] = func

    return KeepIR()


@contextmanager
def observing() -> Iterator[Captured]:
    """Run the block (TVM's lowering) in a copy of the current PassContext with one more instrument,
    which only keeps references to two modules; the build's output is the same."""
    import tvm

    ctx = tvm.transform.PassContext.current()
    seen = Captured()
    with tvm.transform.PassContext(opt_level=int(ctx.opt_level), required_pass=list(ctx.required_pass),
                                   disabled_pass=list(ctx.disabled_pass),
                                   instruments=[*ctx.instruments, _instrument(seen)], config=dict(ctx.config.items())):
        yield seen


# ---- IR expressions <-> c_expr text ------------------------------------------------------------
def _text(e: Any) -> str | None:
    """A PrimExpr as c_expr text (casts dropped: sizes are far from the types' limits); None if it
    uses an operation c_expr does not read."""
    from tvm import tirx

    if isinstance(e, tirx.IntImm):
        return str(int(e.value))
    if isinstance(e, tirx.Var):
        return str(e.name)
    if isinstance(e, tirx.Cast):
        return _text(e.value)
    ops = ((tirx.Add, "+"), (tirx.Sub, "-"), (tirx.Mul, "*"), (tirx.FloorDiv, "//"), (tirx.FloorMod, "%"),
           (tirx.Div, "/"), (tirx.Mod, "%"))
    for cls, op in ops:
        if isinstance(e, cls):
            a, b = _text(e.a), _text(e.b)
            return None if a is None or b is None else f"({a}) {op} ({b})"
    if isinstance(e, (tirx.Min, tirx.Max)):
        a, b = _text(e.a), _text(e.b)
        name = "min" if isinstance(e, tirx.Min) else "max"
        return None if a is None or b is None else f"{name}({a}, {b})"
    return None


def _expr(e: Any) -> Expr | None:
    text = _text(e)
    return None if text is None else c_expr.parse(text)


class _Simplifier:
    """c_expr text -> PrimExpr -> tvm.sym.Analyzer -> c_expr text; anything it cannot read is kept."""

    def __init__(self) -> None:
        from tvm import sym

        self.analyzer = sym.Analyzer()
        self.vars: dict[str, Any] = {}

    def var(self, name: str) -> Any:
        from tvm import sym, tirx

        if name not in self.vars:
            self.vars[name] = tirx.Var(name, "int64")
            self.analyzer.update(self.vars[name], sym.ConstIntBound(0, sym.ConstIntBound.POS_INF))
        return self.vars[name]

    def prim(self, node: ast.AST) -> Any:
        from tvm import tirx

        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return tirx.const(node.value, "int64")
        if isinstance(node, ast.Name):
            return self.var(node.id)
        if isinstance(node, ast.BinOp):
            a, b = self.prim(node.left), self.prim(node.right)
            table: dict[type, Callable[[Any, Any], Any]] = {
                ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
                ast.FloorDiv: tirx.floordiv, ast.Div: tirx.truncdiv, ast.Mod: tirx.truncmod}
            if type(node.op) in table:
                return table[type(node.op)](a, b)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and node.args:
            terms = [self.prim(a) for a in node.args]
            out = terms[0]
            for t in terms[1:]:
                out = (tirx.min if node.func.id == "min" else tirx.max)(out, t)
            return out
        raise ValueError(type(node).__name__)

    def largest(self, e: Any) -> Any:
        """max(...) without the terms another term is proven to bound."""
        from tvm import tirx

        terms, stack = [], [e]
        while stack:
            x = stack.pop()
            if isinstance(x, tirx.Max):
                stack += [x.b, x.a]
            else:
                terms.append(self.analyzer.simplify(x))
        kept = [t for i, t in enumerate(terms)
                if not any(j != i and self.analyzer.can_prove(t <= u) and (j < i or not self.analyzer.can_prove(u <= t))
                           for j, u in enumerate(terms))]
        out = kept[0]
        for t in kept[1:]:
            out = tirx.max(out, t)
        return out

    def __call__(self, size: Expr | None) -> Expr | None:
        if size is None or size.value is not None:
            return size
        try:
            simplified = self.largest(self.analyzer.simplify(self.prim(ast.parse(size.text, mode="eval").body)))
        except (SyntaxError, ValueError):
            return size
        text = _text(simplified)
        return size if text is None else c_expr.parse(text)


# ---- the Relax IR: sizes by order of allocation --------------------------------------------------
def _bindings(expr: Any) -> Iterator[Any]:
    from tvm import relax

    for block in getattr(expr, "blocks", ()):
        for binding in block.bindings:
            yield binding
            if isinstance(binding.value, relax.If):
                yield from _bindings(binding.value.true_branch)
                yield from _bindings(binding.value.false_branch)


def _shape(arg: Any) -> tuple[Expr, ...] | None:
    values = getattr(arg, "values", None)
    dims = [_expr(v) for v in values] if values is not None else None
    return None if dims is None or any(d is None for d in dims) else tuple(dims)  # type: ignore[arg-type]


def _storage_size(call: Any) -> Expr | None:
    """Bytes of relax.vm.alloc_storage(shape, device, dtype, scope) or relax.memory.alloc_storage(bytes, ...)."""
    shape = _shape(call.args[0])
    if shape is None:
        return None
    if call.op.name == "relax.vm.alloc_storage":
        dtype = getattr(call.args[2], "value", None)
        itemsize = (dtype.bits * dtype.lanes + 7) // 8 if dtype is not None else 1
        shape = (*shape, c_expr.constant(itemsize))
    return c_expr.product(list(shape))


def ir_sizes(relax_mod: Any, program: vm_program.VMProgram) -> dict[str, IRSizes]:
    """Per VM function, the sizes its IR gives, kept only where they line up with the bytecode's
    allocations one for one."""
    import tvm
    from tvm import relax

    counts = {f.name: [sum(1 for i in program.code(f.name) if i.op == "call"
                           and program.functions[i.func].name == name) for name in
                       (vm_walk.ALLOC_STORAGE, vm_walk.ALLOC_TENSOR)]
              for f in program.functions if f.kind == "vm"}
    out = {}
    for gv, func in relax_mod.functions.items():
        if not isinstance(func, relax.Function) or gv.name_hint not in counts:
            continue
        storages: list[Expr | None] = []
        tensors: list[tuple[Expr, ...] | None] = []
        for b in _bindings(func.body):
            op = getattr(b.value, "op", None)
            if not isinstance(op, tvm.ir.Op):
                continue
            if op.name in ("relax.vm.alloc_storage", "relax.memory.alloc_storage"):
                storages.append(_storage_size(b.value))
            elif op.name in ("relax.vm.alloc_tensor", "relax.memory.alloc_tensor"):
                tensors.append(_shape(b.value.args[2]))
        want = counts[gv.name_hint]
        out[gv.name_hint] = IRSizes(tuple(storages) if len(storages) == want[0] else (),
                                    tuple(tensors) if len(tensors) == want[1] else ())
    return out


# ---- the host TIR: workspaces in order ---------------------------------------------------------
def _fields(n: Any) -> Iterator[Any]:
    """The values of an IR node's fields, in declaration order (its ancestors' first)."""
    info, chain = getattr(type(n), "__tvm_ffi_type_info__", None), []
    while info is not None:
        chain.insert(0, info)
        info = info.parent_type_info
    for part in chain:
        for f in part.fields:
            if f.name != "span":
                yield getattr(n, f.name, None)


def _statements(body: Any) -> Iterator[Any]:
    """Every statement below `body`, in program order (expressions are not entered)."""
    import tvm_ffi
    from tvm import tirx

    stack = [body]
    while stack:
        n = stack.pop()
        yield n
        children: list[Any] = []
        for value in _fields(n):
            if isinstance(value, tirx.Stmt):
                children.append(value)
            elif isinstance(value, (list, tuple, tvm_ffi.Array)):
                children += [v for v in value if isinstance(v, tirx.Stmt)]
        stack += reversed(children)


def _calls(stmt: Any) -> Iterator[Any]:
    """The calls a statement makes at its top (a value, a condition, a comparison of a call)."""
    import tvm

    for value in _fields(stmt):
        for e in (value, getattr(value, "a", None), getattr(value, "b", None)):
            if isinstance(e, tvm.ir.Call) and hasattr(e.op, "name"):
                yield e


def _allocates(body: Any) -> bool:
    """Whether the function calls TVMBackendAllocWorkspace at all (one walk in C++, stopped at the
    first call; a small kernel has none, and reading each statement in Python costs milliseconds)."""
    import tvm
    import tvm_ffi

    def visit(call: Any) -> Any:
        return tvm_ffi.VisitInterrupt(call) if getattr(call.op, "name", "").endswith(_ALLOC) else None

    return tvm_ffi.structural_walk(body, [(tvm.ir.Call, visit)], order="pre") is not None


def host_workspaces(func: Any) -> tuple[list[Workspace], list[lifetimes.Span]]:
    """A host function's workspaces (in order) and their spans (positions: alloc/free events)."""
    from tvm import tirx

    if not _allocates(func.body):
        return [], []
    allocs: list[tuple[Workspace, Any, int]] = []
    freed: dict[int, int] = {}
    events = 0
    for stmt in _statements(func.body):
        for call in _calls(stmt):
            if call.op.name.endswith(_ALLOC) and len(call.args) == 5:
                device, _, nbytes, code, bits = call.args
                size = _expr(nbytes)
                if size is None:
                    continue
                dtype = str(vm_program.DType(int(code.value), int(bits.value))) if hasattr(code, "value") else "?"
                name = vm_walk.DEVICE_TYPES.get(int(device.value), "?") if hasattr(device, "value") else "?"
                var = stmt.var if isinstance(stmt, (tirx.LetStmt, tirx.Bind)) else None
                allocs.append((Workspace(name, dtype, size), var, events))
                events += 1
            elif call.op.name.endswith(_FREE) and len(call.args) == 3:
                for i, (_, var, _) in enumerate(allocs):
                    if var is not None and i not in freed and call.args[2].same_as(var):
                        freed[i] = events
                events += 1
    spans = [lifetimes.Span(at, freed.get(i, events), w.size, w.device) for i, (w, _, at) in enumerate(allocs)]
    return [w for w, _, _ in allocs], spans


# ---- the record --------------------------------------------------------------------------------
def _vm_facts(program: vm_program.VMProgram, devices: tuple[str, ...], sizes: dict[str, IRSizes],
              host: dict[str, HostFacts], simplify: _Simplifier) -> dict[str, VMFacts]:
    out = {}
    for f in program.functions:
        if f.kind != "vm":
            continue
        walk = vm_walk.walk(program, f.name, devices, None, sizes)
        spans = lifetimes.function_spans(walk, lambda callee: host[callee].peaks if callee in host else {})
        peaks = lifetimes.peak(spans or [])
        totals = lifetimes.totals(walk)
        workspace = c_expr.total([w.size for s in walk.sites if s.callee in host for w in host[s.callee].workspaces])
        storages = tuple(StorageFact(b.origin, b.ordinal, b.device, simplify(b.size), (b.first, b.last), b.cached)
                         for b in walk.storages)
        out[f.name] = VMFacts(storages, sizes.get(f.name, IRSizes()), {d: simplify(p) for d, p in peaks.items()},
                              simplify(totals["storage"]), simplify(totals["cached"]), simplify(workspace))
    return out


def collect(seen: Captured, blob: library_blob.LibraryBlob | None, devices: tuple[str, ...]) -> MemoryFacts | None:
    """The record of one build (None when the IR was not seen: a pipeline of one's own without TVM's
    VM lowering, for one). `devices` are a VirtualMachine's devices for the target, the host last."""
    simplify = _Simplifier()
    host = {}
    for name, func in seen.host.items():
        workspaces, spans = host_workspaces(func)
        host[name] = HostFacts(tuple(Workspace(w.device, w.dtype, simplify(w.size)) for w in workspaces),
                               {d: simplify(p) for d, p in lifetimes.peak(spans).items()})
    payload = vm_program.payload_of(blob) if blob is not None else None
    if payload is None:
        return MemoryFacts({}, host) if seen.host else None
    if seen.relax is None:
        return None
    program = vm_program.parse(payload)
    sizes = {name: IRSizes(tuple(simplify(s) for s in f.storages),
                           tuple(None if t is None else tuple(simplify(d) for d in t) for t in f.tensors))
             for name, f in ir_sizes(seen.relax, program).items()}
    return MemoryFacts(_vm_facts(program, devices, sizes, host, simplify), host)


def write(facts: MemoryFacts, folder: Path, host: str) -> Path:
    """Write the record as folder/memory.json and as an object to link into the library (returned)."""
    data = facts.to_json().encode()
    (folder / memory_facts.FILE).write_bytes(data)
    return elf_object.write(data, folder / "memory.o", host, section=memory_facts.SECTION, symbol=None)


def keep(seen: Captured | None, blob: library_blob.LibraryBlob | None, folder: Path, kind: str,
         host: str) -> list[Path]:
    """The build's part: the record written beside the library, and the object that puts it inside
    (an empty list when there is nothing to record)."""
    facts = collect(seen, blob, vm_walk.devices_for(kind)) if seen is not None else None
    return [] if facts is None else [write(facts, folder, host)]
