"""The storage plan of a Relax VM executable: what memory a call allocates, read from the bytecode.

TVM's memory planning (StaticPlanBlockMemory) leaves, in each VM function, calls to
vm.builtin.alloc_storage (one block of memory: size, device, scope) and vm.builtin.alloc_tensor
(a tensor placed in a block at an offset). Several tensors whose lifetimes do not overlap share
one block. This module lists the blocks, the tensors in each, and the total, without running
anything (it reads the library file, so it works in a runtime-only TVM install).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InvalidInputError, LibraryFormatError
from ..formats import library_blob, vm_program, vm_walk
from ..formats.vm_program import TensorConstant, VMProgram
from ..text.format import byte_size


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
    return "? B" if n is None else byte_size(n)


def _function_plan(name: str, walk: vm_walk.FunctionWalk) -> list[Storage]:
    return [Storage(name, i, b.size.value if b.size is not None else None, b.dtype, b.scope, b.device_index,
                    tuple(PlacedTensor(None if t.dims is None else tuple(d.value if d is not None else None
                                                                         for d in t.dims), t.dtype, t.offset)
                          for t in b.tensors), b.holds_output)
            for i, b in enumerate(walk.storages)]


def plan(program: VMProgram) -> StoragePlan:
    """The storage plan of a decoded VM executable (a CUDA graph's alloc and capture functions are
    part of the function that calls them, as a call runs them)."""
    walks = {f.name: vm_walk.walk(program, f.name, ("device",)) for f in program.functions if f.kind == "vm"}
    folded = {name for w in walks.values() for name in w.folded}
    storages = [s for name, w in walks.items() if name not in folded for s in _function_plan(name, w)]
    weights = sum(c.nbytes for c in program.constants if isinstance(c, TensorConstant))
    return StoragePlan(storages, weights)


def _program_bytes(source: Any) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if vm_program.is_vm_executable(data):
            return data
        payload = vm_program.payload_of(library_blob.parse(data))
    elif isinstance(source, (str, os.PathLike)):
        from ..formats.library_blob import blob_of

        blob = blob_of(source)
        payload = vm_program.payload_of(library_blob.parse(blob)) if blob is not None else None
    elif hasattr(source, "open_library") and hasattr(source, "key"):  # a jitflow Executable
        with source.open_library() as got:
            return _program_bytes(got.library)
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
