"""A Relax VirtualMachine over a library jitflow built: from a jitted Executable or an exported .so.

Uses only tvm_ffi and TVM's runtime library (virtual_machine.py), so load_vm imports no `tvm`.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ..errors import InvalidInputError, LoadError
from ..formats import VM_KIND
from .tensors import device_of
from .virtual_machine import VirtualMachine

__all__ = ["MEMORY_CFGS", "VirtualMachine", "check_memory_cfg", "device_of", "load_vm", "virtual_machine"]

#: the VirtualMachine's allocators: pooled reuses freed blocks (TVM's default), naive allocates each time
MEMORY_CFGS = ("pooled", "naive")
_CPU = 1   # DLPack's kDLCPU


def check_memory_cfg(memory_cfg: Any) -> None:
    """Refuse a memory_cfg that TVM's VirtualMachine does not know (a name, or a dict of device -> name)."""
    names = list(memory_cfg.values()) if isinstance(memory_cfg, dict) else [memory_cfg]
    if any(n is not None and n not in MEMORY_CFGS for n in names):
        raise InvalidInputError(f"memory_cfg must be one of {', '.join(map(repr, MEMORY_CFGS))}, a dict of "
                                f"device to one of them, or None (pooled), not {memory_cfg!r}")


def virtual_machine(module: Any, device: Any = None, cuda: bool = False,
                    memory_cfg: str | dict[Any, str] | None = None,
                    functions: Callable[[], Sequence[str] | None] | None = None) -> VirtualMachine:
    """A VirtualMachine over a loaded VM library; checks the device fits the library. `functions`
    names the VM's functions for the message of vm[name] when it has none of that name."""
    check_memory_cfg(memory_cfg)
    if module.kind != VM_KIND:
        raise InvalidInputError("this library holds kernels, not a Relax VM: call its functions by name "
                                "(exe['name'] or jitflow.load(path)['name'])")
    dev = device_of(device, cuda)
    on_cpu = dev.dlpack_device_type() == _CPU
    if cuda and on_cpu:
        raise InvalidInputError(f"this library's kernels run on a CUDA GPU; give a CUDA device, not {dev}")
    if not cuda and not on_cpu:
        raise InvalidInputError(f"this library was built for the CPU ('c' target); give the CPU, not {dev}")
    if isinstance(memory_cfg, dict):
        memory_cfg = {device_of(d, cuda): kind for d, kind in memory_cfg.items()}
    try:
        return VirtualMachine(module, dev, memory_cfg=memory_cfg, functions=functions)
    except Exception as exc:
        raise LoadError(f"cannot start a VirtualMachine on {dev}: {exc}") from None


def load_vm(path: str | os.PathLike, device: Any = None, memory_cfg: str | dict[Any, str] | None = None,
            device_query: Any = None) -> VirtualMachine:
    """Load an exported Relax library into a VirtualMachine on `device` (tvm_ffi and TVM's runtime only).

    device: a Device, "cpu", "cuda", "cuda:1" or a torch.device; by default the first GPU
    for a library with CUDA code, else the CPU. memory_cfg: "pooled" (TVM's default) or "naive".
    device_query: how that GPU and its driver are found (runtime.compat; default the CUDA driver).
    """
    from .load import load_checked, open_checked

    check_memory_cfg(memory_cfg)
    library, checked = open_checked(path)
    with library:
        cuda = "cuda" in checked.needs
        module = load_checked(library, checked, device_query, gpu_index(device) if cuda else 0)
    return virtual_machine(module, device, cuda, memory_cfg, functions=lambda: vm_functions(path))


def vm_functions(path: str | os.PathLike) -> list[str] | None:
    """The functions a VirtualMachine over the library at `path` can call, read from its VM program
    (for messages: only the function table is decoded); None where they cannot be read."""
    from ..errors import LibraryFormatError
    from ..formats import library_blob, vm_program

    try:
        payloads = library_blob.payloads_of(path, VM_KIND) or []
        if not payloads:
            return None
        return [f.name for f in vm_program.function_table(payloads[0]) if f.kind in vm_program.ENTRY_KINDS]
    except LibraryFormatError:
        return None


def gpu_index(device: Any) -> int:
    """The GPU number `device` names ("cuda:1", a torch.device, a tvm Device), 0 where it names none."""
    if isinstance(device, str):
        tail = device.rsplit(":", 1)[1] if ":" in device else ""
        return int(tail) if tail.isdigit() else 0
    index = getattr(device, "index", None)       # torch.device, tvm_ffi Device
    if index is None:
        index = getattr(device, "device_id", None)
    return index if isinstance(index, int) else 0
