"""Walk the bytecode of a Relax VM function: the storage it allocates and when each block is alive,
the tensors placed in it, the packed functions it calls and the copies its builtins make.

The instructions are those TVM's VM lowering leaves (see vm_program.py for the format):
`vm.builtin.alloc_storage(vm, shape, device index, dtype, scope)` allocates one block,
`vm.builtin.alloc_tensor(storage, offset, shape, dtype)` places a tensor in it, and
`vm.builtin.null_value` empties a register (what TVM's KillAfterLastUse leaves after a last use).
A block is released when the last register that keeps it alive (its storage, a tensor in it, a view
or a tuple of those) is emptied or written again, or when the function returns. Its lifetime is
[allocation, last release] in positions of the function's bytecode.

CUDA graphs (`relax.backend.use_cuda_graph`): `vm.builtin.cuda_graph.get_cached_alloc(vm, F, i)`
runs the VM function F once and keeps its storage across calls; `...run_or_capture(vm, C, args, i)`
captures the VM function C on the first call and replays the captured kernels on every call. Both
functions are folded into the caller at the position of the builtin: F's blocks are marked cached,
C's calls replayed. The shape half of the walk (symbols, the shape heap) is in vm_shapes.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from . import c_expr
from .c_expr import Expr
from .vm_program import VOID, Arg, DType, VMProgram
from .vm_shapes import ShapeFunctions, ShapeTracker, TensorInfo

BUILTIN = "vm.builtin."
ALLOC_STORAGE = BUILTIN + "alloc_storage"
ALLOC_TENSOR = BUILTIN + "alloc_tensor"
MAKE_SHAPE = BUILTIN + "make_shape"
MATCH_SHAPE = BUILTIN + "match_shape"
CHECK_TENSOR = BUILTIN + "check_tensor_info"
RESHAPE = BUILTIN + "reshape"
CALL_TIR_DYN = BUILTIN + "call_tir_dyn"
TO_DEVICE = BUILTIN + "to_device"
MAKE_TUPLE = BUILTIN + "make_tuple"
TUPLE_GETITEM = BUILTIN + "tuple_getitem"
CACHED_ALLOC = BUILTIN + "cuda_graph.get_cached_alloc"
RUN_OR_CAPTURE = BUILTIN + "cuda_graph.run_or_capture"
COPY_TO_HOST = (BUILTIN + "tensor_to_shape", BUILTIN + "read_if_cond")
HOST_DEVICES = ("cpu", "cuda_host")
#: DLPack device type -> name (the VM's and the host code's device numbers)
DEVICE_TYPES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                13: "cuda_managed"}
_MAX_DEPTH = 8
Refs = frozenset            # block indices a register keeps alive
#: One item of a tuple register: what it keeps alive, the tensor, the storage block it is (or None).
Item = tuple[Refs, 'TensorInfo | None', 'int | None']


@dataclass(frozen=True)
class IRSizes:
    """Sizes one VM function's IR gives (build time), by order of allocation in its own bytecode:
    each alloc_storage's bytes and each alloc_tensor's dims (None where the IR did not say)."""

    storages: tuple[Expr | None, ...] = ()
    tensors: tuple[tuple[Expr, ...] | None, ...] = ()


@dataclass
class Block:
    """One allocation: its size, dtype hint, scope, device, the tensors placed in it, its lifetime."""

    size: Expr | None
    dtype: str
    scope: str
    device: str
    device_index: int
    tensors: list[TensorInfo] = field(default_factory=list)
    holds_output: bool = False
    first: int = 0                 # the position that allocates it
    last: int = 0                  # the position that releases its last reference (the return at the latest)
    cached: bool = False           # a CUDA graph's storage: allocated on the first call, kept for later ones
    kind: str = "storage"          # "storage" (alloc_storage), or "copy" (the new tensor of a to_device)
    origin: str = ""               # the VM function whose bytecode allocates it (the caller, or one folded in)
    ordinal: int = 0               # its index among the alloc_storage instructions of `origin`


@dataclass(frozen=True)
class CopyCall:
    """A builtin that copies a tensor: where in the function, which builtin, from and to which device."""

    instruction: int
    call: str
    source: str | None          # device name of the tensor copied, None where the bytecode does not say
    destination: str
    tensor: TensorInfo | None
    block: int | None = None    # the block of the copy's new tensor (to_device), in FunctionWalk.blocks


@dataclass(frozen=True)
class CallSite:
    """A packed (TIR) function called: where, and whether a captured CUDA graph replays it."""

    callee: str
    position: int
    replayed: bool = False


@dataclass
class FunctionWalk:
    """Everything one VM function does with memory, in instruction order."""

    name: str
    params: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)       # packed functions called, builtins left out
    copies: list[CopyCall] = field(default_factory=list)
    symbols: dict[str, str] = field(default_factory=dict)  # shape symbol -> where it comes from
    unknown_shape_functions: list[str] = field(default_factory=list)
    sites: list[CallSite] = field(default_factory=list)   # the calls, with their positions
    length: int = 0                                       # instructions in the function
    folded: list[str] = field(default_factory=list)       # VM functions folded in (CUDA graph alloc/capture)

    @property
    def storages(self) -> list[Block]:
        """The alloc_storage blocks (the to_device copies' tensors left out)."""
        return [b for b in self.blocks if b.kind == "storage"]


def devices_for(kind: str | None) -> tuple[str, ...]:
    """The devices a VirtualMachine gets for a library of this target kind (the host is appended last)."""
    return ("cuda", "cpu") if kind == "cuda" else ("cpu",)


def device_name(devices: tuple[str, ...], index: int) -> str:
    """The name of VM device `index` (-1 is the host, the last device)."""
    if -len(devices) <= index < len(devices):
        return devices[index]
    return f"device {index}"


class _Walker(ShapeTracker):
    def __init__(self, program: VMProgram, name: str, devices: tuple[str, ...], shape_functions: ShapeFunctions | None,
                 hints: Mapping[str, IRSizes], out: FunctionWalk | None = None, at: int | None = None,
                 mode: str = "call", depth: int = 0) -> None:
        func = next(f for f in program.functions if f.name == name and f.kind == "vm")
        self.out = out or FunctionWalk(name, tuple(func.param_names))
        super().__init__(program, func.param_names, devices, shape_functions, self.out.symbols,
                         self.out.unknown_shape_functions)
        self.name, self.hints, self.at, self.mode, self.depth = name, hints.get(name), at, mode, depth
        self.all_hints = hints
        self.storage_of: dict[int, int] = {}            # register -> block index
        self.refs: dict[int, Refs] = {}                  # register -> blocks it keeps alive
        self.items: dict[int, tuple[Item, ...]] = {}     # tuple register -> its items
        self.counts = {"storage": 0, "tensor": 0}

    def pos(self, index: int) -> int:
        return index if self.at is None else self.at

    # ---- references and lifetimes -----------------------------------------------------------
    def release(self, register: int, index: int) -> None:
        """The register is written or emptied at `index`: whatever it held is gone."""
        for b in self.refs.pop(register, ()):
            block = self.out.blocks[b]
            block.last = max(block.last, self.pos(index))
        for table in (self.storage_of, self.tensors, self.shapes, self.items):
            table.pop(register, None)

    def assign(self, dst: int, index: int, refs: Refs, tensor: TensorInfo | None = None,
               storage: int | None = None) -> None:
        self.release(dst, index)
        if dst == VOID:
            return
        if refs:
            self.refs[dst] = refs
        if tensor is not None:
            self.tensors[dst] = tensor
        if storage is not None:
            self.storage_of[dst] = storage

    def item(self, arg: Arg) -> Item:
        return self.held(arg), self.tensor(arg), self.storage_of.get(arg.value) if arg.kind == "reg" else None

    def held(self, arg: Arg) -> Refs:
        return self.refs.get(arg.value, Refs()) if arg.kind == "reg" else Refs()

    # ---- instructions -----------------------------------------------------------------------
    def run(self) -> tuple[Item, ...]:
        """Walk the function; returns what its return value holds (by tuple item)."""
        code = self.program.code(self.name)
        if self.at is None:
            self.out.length = len(code)
        returned: tuple[Item, ...] = ()
        for index, instr in enumerate(code):
            if instr.op == "ret":
                returned = self.items.get(instr.dst) or (self.item(Arg("reg", instr.dst)),)
                if self.at is None:
                    for b in self.refs.get(instr.dst, ()):
                        self.out.blocks[b].holds_output = True
                for register in list(self.refs):
                    self.release(register, index)
            elif instr.op == "call":
                self.call(index, instr.dst, instr.func, instr.args)
        return returned

    def call(self, index: int, dst: int, func: int, args: tuple[Arg, ...]) -> None:
        functions = self.program.functions
        callee = functions[func].name if 0 <= func < len(functions) else ""
        if callee == CALL_TIR_DYN and args and args[0].kind == "func" and 0 <= args[0].value < len(functions):
            callee = functions[args[0].value].name
        if callee == ALLOC_STORAGE and len(args) >= 4:
            self.alloc_storage(index, dst, args)
        elif callee == ALLOC_TENSOR and len(args) >= 4 and args[0].kind == "reg":
            block = self.storage_of.get(args[0].value)
            self.assign(dst, index, self.held(args[0]), self.alloc_tensor(block, args))
        elif callee == MAKE_SHAPE:
            shape = self.make_shape(args)
            self.assign(dst, index, Refs())
            if dst != VOID:
                self.shapes[dst] = shape
        elif callee in (CACHED_ALLOC, RUN_OR_CAPTURE) and len(args) >= 2 and args[1].kind == "func":
            self.fold(index, dst, callee, functions[args[1].value].name, args)
        elif callee == MAKE_TUPLE:
            items = tuple(self.item(a) for a in args)
            self.assign(dst, index, Refs().union(*(i[0] for i in items)))
            if dst != VOID:
                self.items[dst] = items
        elif callee == TUPLE_GETITEM and len(args) >= 2 and args[0].kind == "reg":
            self.getitem(index, dst, args)
        else:
            self.other(index, dst, callee, args)

    def other(self, index: int, dst: int, callee: str, args: tuple[Arg, ...]) -> None:
        result: TensorInfo | None = None
        refs = Refs()
        if callee == MATCH_SHAPE:
            self.match_shape(args)
        elif callee == CHECK_TENSOR:
            self.check_tensor(args)
        elif callee == BUILTIN + "alloc_shape_heap":
            self.heap_register = dst
        elif callee == RESHAPE and len(args) >= 2 and args[0].kind == "reg":
            old, refs = self.tensors.get(args[0].value), self.held(args[0])
            if old is not None:
                result = TensorInfo(self.shape(args[1]), old.dtype, old.device, old.offset, old.itemsize)
        elif callee == TO_DEVICE and len(args) >= 3:
            result, refs = self.to_device(index, args)
        elif callee in COPY_TO_HOST and args:
            self.copy_to_host(index, callee, args[0])
        elif not callee.startswith(BUILTIN):
            self.out.calls.append(callee)
            self.out.sites.append(CallSite(callee, self.pos(index), self.mode == "capture"))
            if self.heap_register is not None and len(args) == 1 and args[0] == Arg("reg", self.heap_register):
                if self.hints is None:
                    self.shape_function(callee)
        self.assign(dst, index, refs, result)

    def getitem(self, index: int, dst: int, args: tuple[Arg, ...]) -> None:
        items, i = self.items.get(args[0].value), self.const(args[1])
        if items is not None and isinstance(i, int) and 0 <= i < len(items):
            self.assign(dst, index, *items[i])
        else:
            self.assign(dst, index, self.held(args[0]))

    def fold(self, index: int, dst: int, builtin: str, name: str, args: tuple[Arg, ...]) -> None:
        """A CUDA graph builtin: walk its VM function here, its storage cached or its calls replayed."""
        if name not in self.out.folded:
            self.out.folded.append(name)
        if self.depth >= _MAX_DEPTH:
            self.assign(dst, index, Refs())
            return
        mode = "cached" if builtin == CACHED_ALLOC else "capture"
        child = _Walker(self.program, name, self.devices, self.shape_functions, self.all_hints, self.out,
                        self.pos(index), mode, self.depth + 1)
        if mode == "capture" and len(args) >= 3 and args[2].kind == "reg":
            for register, item in enumerate(self.items.get(args[2].value, ())):
                child.assign(register, 0, *item)
        returned = child.run()
        self.assign(dst, index, Refs().union(*(i[0] for i in returned)))
        if dst != VOID:
            self.items[dst] = returned

    def alloc_storage(self, index: int, dst: int, args: tuple[Arg, ...]) -> None:
        shape, device, dtype = self.shape(args[1]), self.const(args[2]), self.const(args[3])
        scope = self.const(args[4]) if len(args) > 4 else "global"
        itemsize = dtype.itemsize if isinstance(dtype, DType) else None
        size = None
        if shape is not None and itemsize is not None and all(d is not None for d in shape):
            size = c_expr.product([d for d in shape if d is not None] + [c_expr.constant(itemsize)])
        ordinal = self.counts["storage"]
        self.counts["storage"] += 1
        if self.hints is not None and ordinal < len(self.hints.storages) and self.hints.storages[ordinal] is not None:
            size = self.hints.storages[ordinal]
        where = device if isinstance(device, int) else 0
        block = len(self.out.blocks)
        self.out.blocks.append(Block(size, str(dtype) if dtype is not None else "?",
                                     scope if isinstance(scope, str) else "global",
                                     device_name(self.devices, where), where, first=self.pos(index),
                                     last=self.pos(index), cached=self.mode == "cached", origin=self.name,
                                     ordinal=ordinal))
        self.assign(dst, index, Refs([block]), storage=block)

    def alloc_tensor(self, block: int | None, args: tuple[Arg, ...]) -> TensorInfo | None:
        offset, dtype = self.const(args[1]), self.const(args[3])
        dims = self.shape(args[2])
        ordinal = self.counts["tensor"]
        self.counts["tensor"] += 1
        if self.hints is not None and ordinal < len(self.hints.tensors) and self.hints.tensors[ordinal] is not None:
            dims = self.hints.tensors[ordinal]
        tensor = TensorInfo(dims, str(dtype) if isinstance(dtype, DType) else None,
                            self.out.blocks[block].device if block is not None else None,
                            offset if isinstance(offset, int) else None,
                            dtype.itemsize if isinstance(dtype, DType) else None)
        if block is not None:
            self.out.blocks[block].tensors.append(tensor)
        return tensor

    def to_device(self, index: int, args: tuple[Arg, ...]) -> tuple[TensorInfo | None, Refs]:
        """A copy to another device: a new tensor there (an allocation of its own while it is alive)."""
        tensor = self.tensor(args[0])
        dev_type = self.const(args[1])
        destination = DEVICE_TYPES.get(dev_type, f"device type {dev_type}") if isinstance(dev_type, int) \
            else "?"
        source = tensor.device if tensor else None
        if tensor is None:
            self.out.copies.append(CopyCall(self.pos(index), TO_DEVICE, source, destination, tensor))
            return None, Refs()
        result = TensorInfo(tensor.dims, tensor.dtype, destination, None, tensor.itemsize)
        block = len(self.out.blocks)
        self.out.copies.append(CopyCall(self.pos(index), TO_DEVICE, source, destination, tensor, block))
        self.out.blocks.append(Block(result.nbytes, tensor.dtype or "?", "global", destination,
                                     self.devices.index(destination) if destination in self.devices else 0,
                                     [result], first=self.pos(index), last=self.pos(index), kind="copy",
                                     origin=self.name))
        return result, Refs([block])

    def copy_to_host(self, index: int, callee: str, arg: Arg) -> None:
        tensor = self.tensor(arg)
        source = tensor.device if tensor else None
        if source in HOST_DEVICES or (source is None and self.devices[0] in HOST_DEVICES):
            return      # already on the host: the builtin reads it in place
        self.out.copies.append(CopyCall(self.pos(index), callee, source, "cpu", tensor))


def walk(program: VMProgram, name: str, devices: tuple[str, ...], shape_functions: ShapeFunctions | None = None,
         hints: Mapping[str, IRSizes] | None = None) -> FunctionWalk:
    """Walk VM function `name`; devices are the VM's devices in order (the host last). `hints` are
    the sizes the build read from the IR, by VM function, where the build recorded them."""
    walker = _Walker(program, name, devices, shape_functions, hints or {})
    walker.run()
    return walker.out
