"""What a Relax VM function knows of shapes while its bytecode runs: the shape heap, the shapes it
builds and the shape symbols it reads from its arguments (the half of the bytecode walk that
vm_walk.py leaves to this module).

`vm.builtin.match_shape` stores a dimension of an argument into the shape heap (code 1) or checks it
against an immediate (code 0) or a slot (code 3), `vm.builtin.make_shape` builds a shape from
immediates (code 0) and heap slots (code 1), and a TIR shape function computes heap slots from
others. Sizes are c_expr expressions of the shape symbols, named as in the function's signature
("n"), or None where the bytecode does not say.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from . import c_expr
from .c_expr import Expr
from .vm_program import Arg, DType, Shape, TensorConstant, VMProgram

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
        return c_expr.product([d for d in self.dims if d is not None] + [c_expr.constant(self.itemsize)])


def _annotation_dims(context: str) -> list[str] | None:
    """The dimension names of the tensor annotation in an error context string, e.g. ["n", "16"]."""
    m = _ANNOTATION.search(context)
    return [d.strip() for d in m.group(1).split(",") if d.strip()] if m else None


class ShapeTracker:
    """The shape heap, the shapes in registers, the tensors' shapes and dtypes, and the symbols."""

    def __init__(self, program: VMProgram, params: tuple[str, ...], devices: tuple[str, ...],
                 shape_functions: ShapeFunctions | None, symbols: dict[str, str],
                 unknown_shape_functions: list[str]) -> None:
        self.program = program
        self.params = params
        self.devices = devices
        self.shape_functions = shape_functions
        self.symbols = symbols
        self.unknown_shape_functions = unknown_shape_functions
        self.heap: dict[int, Expr] = {}
        self.heap_register: int | None = None
        self.shapes: dict[int, tuple[Expr | None, ...] | None] = {}   # register -> shape from make_shape
        self.tensors: dict[int, TensorInfo] = {}                        # register -> tensor

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
        self.symbols.setdefault(name, origin)
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
            self.unknown_shape_functions.append(name)
            return
        definitions = {f"heap_{slot}": expr.text for slot, expr in self.heap.items()}
        for slot, text in sorted(writes.items()):
            parsed = c_expr.parse(text, definitions)
            if any(s.startswith("heap_") for s in parsed.symbols):
                self.heap.pop(slot, None)      # reads a slot the bytecode never filled
            else:
                self.heap[slot] = parsed
                definitions[f"heap_{slot}"] = parsed.text
