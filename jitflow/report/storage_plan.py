"""The storage plan of a Relax VM executable: what memory a call allocates, read from the bytecode.

TVM's memory planning (StaticPlanBlockMemory) leaves, in each VM function, calls to
vm.builtin.alloc_storage (one block of memory: size, device, scope) and vm.builtin.alloc_tensor
(a tensor placed in a block at an offset). Several tensors whose lifetimes do not overlap share
one block. This module lists the blocks, the tensors in each, and the total, without running
anything (it reads the library file, so it works in a runtime-only TVM install).
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InvalidInputError, LibraryFormatError
from ..formats import library_blob, vm_program
from ..formats.vm_program import VOID, DType, Shape, TensorConstant, VMProgram

ALLOC_STORAGE = "vm.builtin.alloc_storage"
ALLOC_TENSOR = "vm.builtin.alloc_tensor"
MAKE_SHAPE = "vm.builtin.make_shape"


@dataclass(frozen=True)
class PlacedTensor:
    """A tensor placed in a storage block; None where the VM computes the value (or a dimension
    of the shape) at run time."""

    shape: tuple[int | None, ...] | None
    dtype: str | None
    offset: int | None

    def __str__(self) -> str:
        shape = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype or '?'}[{shape}]" + (f"@{self.offset}" if self.offset else "")


@dataclass(frozen=True)
class Storage:
    """One storage allocation of a VM function.

    size is in bytes (None when it depends on shapes known only at run time); device is the
    index in the VirtualMachine's device list (0 is the device the VM was created on);
    holds_output tells whether the function returns a tensor that lives in this block.
    """

    function: str
    index: int
    size: int | None
    dtype: str
    scope: str
    device: int
    tensors: tuple[PlacedTensor, ...] = ()
    holds_output: bool = False

    @property
    def shared_by(self) -> int:
        """How many tensors are placed in this block over the function's run."""
        return len(self.tensors)


@dataclass
class StoragePlan:
    """Every storage allocation of every VM function, and the bytes of the constants (weights)."""

    storages: list[Storage] = field(default_factory=list)
    constant_bytes: int = 0

    @property
    def total(self) -> int:
        """Bytes of all allocations whose size is known when the library is built."""
        return sum(s.size for s in self.storages if s.size is not None)

    @property
    def dynamic(self) -> int:
        """How many allocations have a size computed at run time (not counted in total)."""
        return sum(1 for s in self.storages if s.size is None)

    def for_function(self, name: str) -> list[Storage]:
        return [s for s in self.storages if s.function == name]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): the allocations, total, dynamic count and constant bytes."""
        return {"storages": [dict(asdict(s), shared_by=s.shared_by) for s in self.storages],
                "total": self.total, "dynamic": self.dynamic, "constant_bytes": self.constant_bytes}

    def __str__(self) -> str:
        lines = [f"storage plan: {len(self.storages)} allocation(s), {_size(self.total)} in all"
                 + (f" plus {self.dynamic} sized at run time" if self.dynamic else "")
                 + f"; constants (weights) {_size(self.constant_bytes)}"]
        for s in self.storages:
            tensors = ", ".join(str(t) for t in s.tensors) or "none"
            where = f"device {s.device}" + ("" if s.scope == "global" else f" {s.scope}")
            lines.append(f"  {s.function} #{s.index}: {_size(s.size)} {where}, {s.shared_by} tensor(s): {tensors}"
                         + (" (output)" if s.holds_output else ""))
        return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "? B"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _const(program: VMProgram, arg: vm_program.Arg) -> Any:
    if arg.kind == "const" and 0 <= arg.value < len(program.constants):
        return program.constants[arg.value]
    if arg.kind == "imm":
        return arg.value
    return None  # a register: known at run time only


def _made_shape(args: tuple[vm_program.Arg, ...]) -> tuple[int | None, ...] | None:
    """make_shape(heap, ndim, code, value, ...): code 0 is an immediate, 1 a value from the shape heap."""
    if len(args) < 2 or args[1].kind != "imm" or len(args) != 2 + 2 * args[1].value:
        return None
    pairs = zip(args[2::2], args[3::2])
    return tuple(v.value if c.kind == "imm" and c.value == 0 and v.kind == "imm" else None for c, v in pairs)


def _function_plan(program: VMProgram, name: str) -> list[Storage]:
    blocks: list[dict[str, Any]] = []
    storage_of: dict[int, int] = {}   # register -> block holding the storage object
    tensor_in: dict[int, int] = {}    # register -> block the tensor in it lives in
    shapes: dict[int, tuple[int | None, ...] | None] = {}  # register -> shape built by make_shape
    output: set[int] = set()
    for instr in program.code(name):
        if instr.op == "ret":
            if instr.dst in tensor_in:
                output.add(tensor_in[instr.dst])
            continue
        if instr.op != "call":
            continue
        callee = program.functions[instr.func].name if 0 <= instr.func < len(program.functions) else ""
        if instr.dst != VOID:  # the register is written: whatever it held is gone
            storage_of.pop(instr.dst, None)
            tensor_in.pop(instr.dst, None)
            shapes.pop(instr.dst, None)
        if callee == MAKE_SHAPE:
            shapes[instr.dst] = _made_shape(instr.args)
        elif callee == ALLOC_STORAGE and len(instr.args) >= 4:
            shape, device, dtype = (_const(program, a) for a in instr.args[1:4])
            scope = _const(program, instr.args[4]) if len(instr.args) > 4 else "global"
            size = math.prod(shape.dims) * dtype.itemsize if isinstance(shape, Shape) and \
                isinstance(dtype, DType) else None
            storage_of[instr.dst] = len(blocks)
            blocks.append({"size": size, "dtype": str(dtype) if dtype is not None else "?",
                           "scope": scope if isinstance(scope, str) else "global",
                           "device": device if isinstance(device, int) else 0, "tensors": []})
        elif callee == ALLOC_TENSOR and len(instr.args) >= 4 and instr.args[0].kind == "reg":
            block = storage_of.get(instr.args[0].value)
            if block is None:
                continue
            offset, shape, dtype = (_const(program, a) for a in instr.args[1:4])
            if isinstance(shape, Shape):
                dims = shape.dims
            else:
                dims = shapes.get(instr.args[2].value) if instr.args[2].kind == "reg" else None
            blocks[block]["tensors"].append(PlacedTensor(
                dims,
                str(dtype) if isinstance(dtype, DType) else None,
                offset if isinstance(offset, int) else None))
            tensor_in[instr.dst] = block
    return [Storage(name, i, b["size"], b["dtype"], b["scope"], b["device"], tuple(b["tensors"]), i in output)
            for i, b in enumerate(blocks)]


def plan(program: VMProgram) -> StoragePlan:
    """The storage plan of a decoded VM executable."""
    storages = [s for f in program.functions if f.kind == "vm" for s in _function_plan(program, f.name)]
    weights = sum(c.nbytes for c in program.constants if isinstance(c, TensorConstant))
    return StoragePlan(storages, weights)


def _program_bytes(source: Any) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if vm_program.is_vm_executable(data):
            return data
        payload = vm_program.payload_of(library_blob.parse(data))
    elif isinstance(source, (str, os.PathLike)):
        from ..runtime.load import blob_of

        blob = blob_of(source)
        payload = vm_program.payload_of(library_blob.parse(blob)) if blob is not None else None
    elif hasattr(source, "_obtain") and hasattr(source, "key"):  # a jitflow Executable
        return _program_bytes(source._obtain()[0])
    else:
        module = getattr(source, "mod", source)  # tvm.relax.VMExecutable or a runtime module
        if getattr(module, "kind", None) != vm_program.KIND:
            raise InvalidInputError(f"no Relax VM executable in {type(source).__name__}; give a jitflow "
                                    "Executable, a library path, or a VM executable")
        import tvm_ffi

        pack = tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor", allow_missing=True)
        if pack is None:
            raise InvalidInputError("this TVM has no compiler to serialize a loaded module; give the library's path")
        payload = vm_program.payload_of(library_blob.parse(bytes(pack(module).numpy().tobytes())))
    if payload is None:
        raise LibraryFormatError("the library holds kernels, not a Relax VM executable: it has no storage plan")
    return payload


def storage_plan(source: Any) -> StoragePlan:
    """The storage plan of a Relax VM library.

    source: a jitflow Executable (built or found in the cache), the path of a library, the
    bytes of a library blob or of a VM executable, or a TVM VM executable / runtime module.
    """
    return plan(vm_program.parse(_program_bytes(source)))
