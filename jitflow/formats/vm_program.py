"""Read the Relax VM executable that a library blob carries (its "relax.VMExecutable" module).

Layout (VM format "0.14", little-endian): u64 magic; the version string; the function table
(u64 count; per function: i32 kind, name, i64 first and end instruction, i64 argument count,
i64 register count, the parameter names); in the V2 format the memory scopes; the constant
pool (u64 count; per constant an i32 type index and its value); the code (the instruction
offsets and the instruction words, both u64-counted i64 arrays). Strings are u64-length
prefixed. Tensor constants are read for their dtype and shape; their bytes are skipped.
Malformed input only ever raises LibraryFormatError.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import LibraryFormatError
from . import VM_KIND
from .library_blob import LibraryBlob, _Reader

KIND = VM_KIND
VERSION = "0.14"
_MAGIC_V1, _MAGIC_V2 = 0xD225DE2F4214151D, 0xD225DE2F4214151E
_TENSOR_MAGIC = 0xDD5E40F096B4A13F
_FUNC_KINDS = {0: "packed", 1: "vm", 2: "vm_tir"}
_ARG_KINDS = {0: "reg", 1: "imm", 2: "const", 3: "func"}
_DTYPE_CODES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 6: "bool"}
_VALUE_BITS = 56
#: The register that stands for "no value" (a call's dst when its result is not kept).
VOID = 1 << 54


@dataclass(frozen=True)
class DType:
    """A DLPack data type as the VM stores it."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        return (self.bits * self.lanes + 7) // 8

    def __str__(self) -> str:
        name = f"{_DTYPE_CODES.get(self.code, f'code{self.code}')}{self.bits}"
        if self.code == 6 and self.bits == 8:
            name = "bool"
        return name if self.lanes == 1 else f"{name}x{self.lanes}"


@dataclass(frozen=True)
class Shape:
    """A shape tuple constant (what alloc_storage and alloc_tensor take)."""

    dims: tuple[int, ...]


@dataclass(frozen=True)
class TensorConstant:
    """A tensor in the constant pool (a bound weight): its dtype, shape and size in bytes."""

    dtype: DType
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class Arg:
    """One instruction argument: a register, an immediate, a constant index or a function index."""

    kind: str
    value: int


@dataclass(frozen=True)
class Instruction:
    """op is "call", "ret", "goto" or "if"; a call has dst, func (table index) and args."""

    op: str
    dst: int = VOID
    func: int = -1
    args: tuple[Arg, ...] = ()


@dataclass(frozen=True)
class Function:
    """An entry of the function table: a VM function (with code) or a packed function it calls."""

    name: str
    kind: str
    start: int
    end: int
    num_args: int
    param_names: tuple[str, ...]


#: the kinds of the functions a VirtualMachine can call (the Relax functions)
ENTRY_KINDS = ("vm", "vm_tir")


@dataclass
class VMProgram:
    """A decoded VM executable: function table, constant pool and instructions."""

    version: str
    functions: list[Function]
    constants: list[Any]
    instructions: list[Instruction] = field(default_factory=list)

    @property
    def entry_functions(self) -> list[str]:
        """Names of the functions a VirtualMachine can call (the Relax functions)."""
        return [f.name for f in self.functions if f.kind in ENTRY_KINDS]

    def code(self, name: str) -> list[Instruction]:
        """The instructions of the VM function `name`."""
        for f in self.functions:
            if f.name == name and f.kind == "vm":
                return self.instructions[f.start:f.end]
        raise LibraryFormatError(f"VM executable: no VM function named {name!r}")


def _dtype(r: _Reader) -> DType:
    code, bits, lanes = struct.unpack("<BBH", r.take(4))
    return DType(code, bits, lanes)


def _i32(r: _Reader) -> int:
    return struct.unpack("<i", r.take(4))[0]


def _i64(r: _Reader) -> int:
    return struct.unpack("<q", r.take(8))[0]


def _i64_array(r: _Reader) -> list[int]:
    n = r.count()
    return list(struct.unpack(f"<{n}q", r.take(8 * n)))


def _tensor(r: _Reader) -> TensorConstant:
    if r.u64() != _TENSOR_MAGIC:
        raise LibraryFormatError("VM executable: a tensor constant has a bad magic number")
    r.take(8 + 8)  # reserved word, device
    ndim = _i32(r)
    if not 0 <= ndim <= 64:
        raise LibraryFormatError(f"VM executable: a tensor constant has {ndim} dimensions")
    dtype = _dtype(r)
    shape = tuple(struct.unpack(f"<{ndim}q", r.take(8 * ndim)))
    nbytes = _i64(r)
    r.skip(nbytes)
    return TensorConstant(dtype, shape, nbytes)


def _constant(r: _Reader) -> Any:
    type_index = _i32(r)
    if type_index == 70:  # tensor
        return _tensor(r)
    if type_index == 69:  # shape
        n = r.count()
        return Shape(tuple(struct.unpack(f"<{n}q", r.take(8 * n))))
    if type_index == 65:  # string
        return r.text()
    if type_index == 1:  # int
        return _i64(r)
    if type_index == 3:  # float
        return struct.unpack("<d", r.take(8))[0]
    if type_index == 5:  # data type
        return _dtype(r)
    raise LibraryFormatError(f"VM executable: constant of unknown type index {type_index}")


def _arg(word: int) -> Arg:
    kind = _ARG_KINDS.get((word >> _VALUE_BITS) & 0xFF)
    if kind is None:
        raise LibraryFormatError(f"VM executable: instruction argument of unknown kind in {word:#x}")
    value = word & ((1 << _VALUE_BITS) - 1)
    if value >= 1 << (_VALUE_BITS - 1):  # sign extension
        value -= 1 << _VALUE_BITS
    return Arg(kind, value)


def _instructions(offsets: list[int], words: list[int]) -> list[Instruction]:
    out = []
    try:
        for start in offsets:
            op = words[start]
            if op == 1:
                dst, func, n = words[start + 1:start + 4]
                if n < 0 or start + 4 + n > len(words):
                    raise IndexError
                out.append(Instruction("call", dst, func, tuple(_arg(w) for w in words[start + 4:start + 4 + n])))
            elif op == 2:
                out.append(Instruction("ret", words[start + 1]))
            elif op == 3:
                out.append(Instruction("goto", args=(Arg("imm", words[start + 1]),)))
            elif op == 4:
                out.append(Instruction("if", args=(Arg("reg", words[start + 1]), Arg("imm", words[start + 2]))))
            else:
                raise LibraryFormatError(f"VM executable: unknown opcode {op} at word {start}")
    except (IndexError, ValueError):
        raise LibraryFormatError("VM executable: the code section is truncated") from None
    return out


def _start(data: bytes | memoryview) -> tuple[_Reader, int, str]:
    r = _Reader(data if isinstance(data, memoryview) else bytes(data), "VM executable")
    magic = r.u64()
    if magic not in (_MAGIC_V1, _MAGIC_V2):
        raise LibraryFormatError(f"VM executable: bad magic number {magic:#x}")
    version = r.text()
    if version != VERSION:
        raise LibraryFormatError(f"VM executable: format version {version!r}, jitflow reads {VERSION!r}")
    return r, magic, version


def _functions(r: _Reader) -> list[Function]:
    functions = []
    for _ in range(r.count()):
        kind = _FUNC_KINDS.get(_i32(r), "unknown")
        name = r.text()
        start, end, num_args, _registers = _i64(r), _i64(r), _i64(r), _i64(r)
        params = tuple(r.text() for _ in range(r.count()))
        functions.append(Function(name, kind, start, end, num_args, params))
    return functions


def function_table(data: bytes | memoryview) -> list[Function]:
    """The function table alone (it comes first: the constants are not read)."""
    return _functions(_start(data)[0])


def parse(data: bytes | memoryview) -> VMProgram:
    """Decode the bytes of a "relax.VMExecutable" module (a memoryview is read without copying)."""
    r, magic, version = _start(data)
    functions = _functions(r)
    if magic == _MAGIC_V2:
        for _ in range(r.count()):
            _i64(r)
            r.text()
    constants = [_constant(r) for _ in range(r.count())]
    offsets, words = _i64_array(r), _i64_array(r)
    if not r.done():
        raise LibraryFormatError("VM executable: bytes left over after the code section")
    return VMProgram(version, functions, constants, _instructions(offsets, words))


def is_vm_executable(data: bytes) -> bool:
    """Whether the bytes start like a VM executable (rather than a library blob)."""
    return len(data) >= 8 and struct.unpack("<Q", data[:8])[0] in (_MAGIC_V1, _MAGIC_V2)


def payload_of(blob: LibraryBlob) -> bytes | None:
    """The bytes of the blob's VM executable module, or None when the blob holds no VM."""
    for module in blob.modules:
        if module.kind == KIND:
            return module.payload or b""
    return None
