"""Walk the bytecode of a Relax VM function: the storage it allocates, the tensors placed in it, the
shape symbols it reads, the packed functions it calls and the copies its builtins make.

The instructions are those TVM's VM lowering leaves (see formats/vm_program.py for the format):
`vm.builtin.alloc_storage(vm, shape, device index, dtype, scope)` allocates one block,
`vm.builtin.alloc_tensor(storage, offset, shape, dtype)` places a tensor in it,
`vm.builtin.match_shape` stores a dimension of an argument into the shape heap (code 1),
`vm.builtin.make_shape` builds a shape from immediates (code 0) and heap slots (code 1), and a
TIR shape function computes heap slots from others. `vm.builtin.to_device`,
`vm.builtin.tensor_to_shape` and `vm.builtin.read_if_cond` copy data between devices. Sizes are
c_expr expressions of the shape symbols (named as in the function's signature, e.g. "n"), or None
where the bytecode does not say.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..formats.vm_program import VOID, Arg, DType, Shape, TensorConstant, VMProgram
from . import c_expr
from .c_expr import Expr

BUILTIN = "vm.builtin."
ALLOC_STORAGE = BUILTIN + "alloc_storage"
ALLOC_TENSOR = BUILTIN + "alloc_tensor"
MAKE_SHAPE = BUILTIN + "make_shape"
MATCH_SHAPE = BUILTIN + "match_shape"
CHECK_TENSOR = BUILTIN + "check_tensor_info"
RESHAPE = BUILTIN + "reshape"
CALL_TIR_DYN = BUILTIN + "call_tir_dyn"
TO_DEVICE = BUILTIN + "to_device"
COPY_TO_HOST = (BUILTIN + "tensor_to_shape", BUILTIN + "read_if_cond")
HOST_DEVICES = ("cpu", "cuda_host")
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                   13: "cuda_managed"}
_ANNOTATION = re.compile(r"annotation=R\.Tensor\(\(([^()]*)\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")

#: Reads a shape function's heap writes: name -> {slot: C expression using heap_<j> for slot j}, or None.
ShapeFunctions = Callable[[str], "Mapping[int, str] | None"]


@dataclass(frozen=True)
class TensorInfo:
    """What the bytecode says of a tensor: dims (None where unknown), dtype, device name, offset."""

    dims: tuple[Expr | None, ...] | None
    dtype: str | None
    device: str | None
    offset: int | None = None
    itemsize: int | None = None

    @property
    def nbytes(self) -> Expr | None:
        if self.dims is None or self.itemsize is None or any(d is None for d in self.dims):
            return None
        return product([d for d in self.dims if d is not None] + [c_expr.constant(self.itemsize)])


@dataclass
class Block:
    """One vm.builtin.alloc_storage: its size, dtype hint, scope, device and the tensors placed in it."""

    size: Expr | None
    dtype: str
    scope: str
    device: str
    device_index: int
    tensors: list[TensorInfo] = field(default_factory=list)
    holds_output: bool = False


@dataclass(frozen=True)
class CopyCall:
    """A builtin that copies a tensor: where in the function, which builtin, from and to which device."""

    instruction: int
    call: str
    source: str | None          # device name of the tensor copied, None where the bytecode does not say
    destination: str
    tensor: TensorInfo | None


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


def product(factors: list[Expr]) -> Expr:
    """The product of size expressions, folded where constant."""
    if all(f.value is not None for f in factors):
        return c_expr.constant(math.prod(f.value for f in factors))  # type: ignore[misc]
    texts = [f"({f.text})" for f in factors if f.value != 1]
    return c_expr.parse(" * ".join(texts) or "1")


def device_name(devices: tuple[str, ...], index: int) -> str:
    """The name of VM device `index` (-1 is the host, the last device)."""
    if -len(devices) <= index < len(devices):
        return devices[index]
    return f"device {index}"


class _Walker:
    def __init__(self, program: VMProgram, name: str, devices: tuple[str, ...],
                 shape_functions: ShapeFunctions | None) -> None:
        self.program = program
        self.devices = devices
        self.shape_functions = shape_functions
        func = next(f for f in program.functions if f.name == name and f.kind == "vm")
        self.params = func.param_names
        self.out = FunctionWalk(name, tuple(func.param_names))
        self.heap: dict[int, Expr] = {}
        self.heap_register: int | None = None
        self.storage_of: dict[int, int] = {}            # register -> block index
        self.tensors: dict[int, TensorInfo] = {}         # register -> tensor
        self.block_of: dict[int, int] = {}               # register (tensor) -> block index
        self.shapes: dict[int, tuple[Expr | None, ...] | None] = {}   # register -> shape from make_shape

    # ---- values -----------------------------------------------------------------------------
    def const(self, arg: Arg) -> object:
        if arg.kind == "const" and 0 <= arg.value < len(self.program.constants):
            return self.program.constants[arg.value]
        if arg.kind == "imm":
            return arg.value
        return None

    def shape(self, arg: Arg) -> tuple[Expr | None, ...] | None:
        value = self.const(arg)
        if isinstance(value, Shape):
            return tuple(c_expr.constant(d) for d in value.dims)
        return self.shapes.get(arg.value) if arg.kind == "reg" else None

    def tensor(self, arg: Arg) -> TensorInfo | None:
        value = self.const(arg) if arg.kind == "const" else None
        if isinstance(value, TensorConstant):
            return TensorInfo(tuple(c_expr.constant(d) for d in value.shape), str(value.dtype), self.devices[0],
                              itemsize=value.dtype.itemsize)
        return self.tensors.get(arg.value) if arg.kind == "reg" else None

    def param(self, register: int) -> str:
        return self.params[register] if 0 <= register < len(self.params) else f"register {register}"

    # ---- instructions -----------------------------------------------------------------------
    def run(self) -> FunctionWalk:
        for index, instr in enumerate(self.program.code(self.out.name)):
            if instr.op == "ret":
                block = self.block_of.get(instr.dst)
                if block is not None:
                    self.out.blocks[block].holds_output = True
            elif instr.op == "call":
                self.call(index, instr.dst, instr.func, instr.args)
        return self.out

    def call(self, index: int, dst: int, func: int, args: tuple[Arg, ...]) -> None:
        functions = self.program.functions
        callee = functions[func].name if 0 <= func < len(functions) else ""
        if callee == CALL_TIR_DYN and args and args[0].kind == "func" and 0 <= args[0].value < len(functions):
            callee = functions[args[0].value].name
        result: TensorInfo | None = None
        block: int | None = None
        if callee == ALLOC_STORAGE and len(args) >= 4:
            self.alloc_storage(dst, args)
            return
        if callee == ALLOC_TENSOR and len(args) >= 4 and args[0].kind == "reg":
            block = self.storage_of.get(args[0].value)
            result = self.alloc_tensor(block, args)
        elif callee == MAKE_SHAPE:
            shape = self.make_shape(args)
            self.forget(dst)
            if dst != VOID:
                self.shapes[dst] = shape
            return
        elif callee == MATCH_SHAPE:
            self.match_shape(args)
        elif callee == CHECK_TENSOR:
            self.check_tensor(args)
        elif callee == BUILTIN + "alloc_shape_heap":
            self.heap_register = dst
        elif callee == RESHAPE and len(args) >= 2 and args[0].kind == "reg":
            old = self.tensors.get(args[0].value)
            block = self.block_of.get(args[0].value)
            if old is not None:
                result = TensorInfo(self.shape(args[1]), old.dtype, old.device, old.offset, old.itemsize)
        elif callee == TO_DEVICE and len(args) >= 3:
            result = self.to_device(index, args)
        elif callee in COPY_TO_HOST and args:
            self.copy_to_host(index, callee, args[0])
        elif not callee.startswith(BUILTIN):
            self.out.calls.append(callee)
            if self.heap_register is not None and len(args) == 1 and args[0] == Arg("reg", self.heap_register):
                self.shape_function(callee)
        self.forget(dst)
        if dst != VOID and result is not None:
            self.tensors[dst] = result
            if block is not None:
                self.block_of[dst] = block

    def forget(self, register: int) -> None:
        """The register is written: whatever it held is gone."""
        for table in (self.storage_of, self.tensors, self.block_of, self.shapes):
            table.pop(register, None)

    def alloc_storage(self, dst: int, args: tuple[Arg, ...]) -> None:
        shape, device, dtype = self.shape(args[1]), self.const(args[2]), self.const(args[3])
        scope = self.const(args[4]) if len(args) > 4 else "global"
        itemsize = dtype.itemsize if isinstance(dtype, DType) else None
        size = None
        if shape is not None and itemsize is not None and all(d is not None for d in shape):
            size = product([d for d in shape if d is not None] + [c_expr.constant(itemsize)])
        index = device if isinstance(device, int) else 0
        self.forget(dst)
        self.storage_of[dst] = len(self.out.blocks)
        self.out.blocks.append(Block(size, str(dtype) if dtype is not None else "?",
                                     scope if isinstance(scope, str) else "global",
                                     device_name(self.devices, index), index))

    def alloc_tensor(self, block: int | None, args: tuple[Arg, ...]) -> TensorInfo | None:
        offset, dtype = self.const(args[1]), self.const(args[3])
        tensor = TensorInfo(self.shape(args[2]), str(dtype) if isinstance(dtype, DType) else None,
                            self.out.blocks[block].device if block is not None else None,
                            offset if isinstance(offset, int) else None,
                            dtype.itemsize if isinstance(dtype, DType) else None)
        if block is not None:
            self.out.blocks[block].tensors.append(tensor)
        return tensor

    def make_shape(self, args: tuple[Arg, ...]) -> tuple[Expr | None, ...] | None:
        if len(args) < 2 or args[1].kind != "imm" or len(args) != 2 + 2 * args[1].value:
            return None
        dims: list[Expr | None] = []
        for code, value in zip(args[2::2], args[3::2]):
            if code.value == 0 and value.kind == "imm":
                dims.append(c_expr.constant(value.value))
            elif code.value == 1 and value.kind == "imm":
                dims.append(self.heap.get(value.value))
            else:
                dims.append(None)
        return tuple(dims)

    def match_shape(self, args: tuple[Arg, ...]) -> None:
        """match_shape(value, heap, ndim, (code, value) * ndim, error context)."""
        if len(args) < 3 or args[0].kind != "reg" or args[2].kind != "imm":
            return
        ndim = args[2].value
        pairs = list(zip(args[3:3 + 2 * ndim:2], args[4:4 + 2 * ndim:2]))
        context = self.const(args[3 + 2 * ndim]) if len(args) > 3 + 2 * ndim else None
        names = _annotation_dims(context) if isinstance(context, str) else None
        dims: list[Expr | None] = []
        for d, (code, value) in enumerate(pairs):
            if code.value == 0 and value.kind == "imm":          # the dimension must equal an immediate
                dims.append(c_expr.constant(value.value))
            elif code.value == 1 and value.kind == "imm":        # store the dimension into the heap
                symbol = self.symbol(args[0].value, d, names)
                self.heap[value.value] = c_expr.parse(symbol)
                dims.append(self.heap[value.value])
            elif code.value == 3 and value.kind == "imm":        # must equal a heap slot
                dims.append(self.heap.get(value.value))
            else:
                dims.append(None)
        old = self.tensors.get(args[0].value)
        if args[0].value < len(self.params) or old is not None:
            self.tensors[args[0].value] = TensorInfo(tuple(dims), old.dtype if old else None,
                                                     old.device if old else None, old.offset if old else None,
                                                     old.itemsize if old else None)

    def symbol(self, register: int, dim: int, names: list[str] | None) -> str:
        origin = f"{self.param(register)}.shape[{dim}]"
        name = names[dim] if names and dim < len(names) and _IDENT.fullmatch(names[dim]) else None
        name = name or re.sub(r"\W", "_", f"{self.param(register)}_dim{dim}")
        self.out.symbols.setdefault(name, origin)
        return name

    def check_tensor(self, args: tuple[Arg, ...]) -> None:
        """check_tensor_info(value, ndim, dtype, error context): the argument's dtype."""
        if len(args) < 3 or args[0].kind != "reg":
            return
        dtype = self.const(args[2])
        if isinstance(dtype, DType):
            old = self.tensors.get(args[0].value)
            self.tensors[args[0].value] = TensorInfo(old.dims if old else None, str(dtype),
                                                     old.device if old else None, None, dtype.itemsize)

    def shape_function(self, name: str) -> None:
        writes = self.shape_functions(name) if self.shape_functions else None
        if writes is None:
            self.out.unknown_shape_functions.append(name)
            return
        definitions = {f"heap_{slot}": expr.text for slot, expr in self.heap.items()}
        for slot, text in sorted(writes.items()):
            parsed = c_expr.parse(text, definitions)
            if any(s.startswith("heap_") for s in parsed.symbols):
                self.heap.pop(slot, None)      # reads a slot the bytecode never filled
            else:
                self.heap[slot] = parsed
                definitions[f"heap_{slot}"] = parsed.text

    def to_device(self, index: int, args: tuple[Arg, ...]) -> TensorInfo | None:
        tensor = self.tensor(args[0])
        dev_type = self.const(args[1])
        destination = _DLPACK_DEVICES.get(dev_type, f"device type {dev_type}") if isinstance(dev_type, int) \
            else "?"
        source = tensor.device if tensor else None
        self.out.copies.append(CopyCall(index, TO_DEVICE, source, destination, tensor))
        if tensor is None:
            return None
        return TensorInfo(tensor.dims, tensor.dtype, destination, None, tensor.itemsize)

    def copy_to_host(self, index: int, callee: str, arg: Arg) -> None:
        tensor = self.tensor(arg)
        source = tensor.device if tensor else None
        if source in HOST_DEVICES or (source is None and self.devices[0] in HOST_DEVICES):
            return      # already on the host: the builtin reads it in place
        self.out.copies.append(CopyCall(index, callee, source, "cpu", tensor))


def _annotation_dims(context: str) -> list[str] | None:
    """The dimension names of the tensor annotation in an error context string, e.g. ["n", "16"]."""
    m = _ANNOTATION.search(context)
    return [d.strip() for d in m.group(1).split(",") if d.strip()] if m else None


def walk(program: VMProgram, name: str, devices: tuple[str, ...],
         shape_functions: ShapeFunctions | None = None) -> FunctionWalk:
    """Walk VM function `name`; devices are the VM's devices in order (the host last)."""
    return _Walker(program, name, devices, shape_functions).run()
