"""A Relax VirtualMachine over a library jitflow built: from a jitted Executable or an exported .so.

Uses only TVM's runtime (tvm.runtime.vm), so load_vm works in a runtime-only TVM install.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError, LoadError
from ..formats.vm_program import KIND


def device_of(device: Any, cuda: bool) -> Any:
    """A tvm Device from a Device, "cpu", "cuda", "cuda:1", or a torch.device; None picks the
    library's own kind (the first GPU for a CUDA library, else the CPU)."""
    import tvm

    if device is None:
        return tvm.runtime.device("cuda", 0) if cuda else tvm.cpu(0)
    if isinstance(device, tvm.runtime.Device):
        return device
    if isinstance(device, str):
        text = device
    elif hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        text = device.type if device.index is None else f"{device.type}:{device.index}"
    else:
        raise InvalidInputError(f"device must be a tvm Device, a string such as 'cuda:0' or a torch.device, "
                                f"not {type(device).__name__}")
    try:
        return tvm.runtime.device(text)
    except Exception:
        raise InvalidInputError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'") from None


#: the VirtualMachine's allocators: pooled reuses freed blocks (TVM's default), naive allocates each time
MEMORY_CFGS = ("pooled", "naive")


def check_memory_cfg(memory_cfg: Any) -> None:
    """Refuse a memory_cfg that TVM's VirtualMachine does not know (a name, or a dict of device -> name)."""
    names = list(memory_cfg.values()) if isinstance(memory_cfg, dict) else [memory_cfg]
    if any(n is not None and n not in MEMORY_CFGS for n in names):
        raise InvalidInputError(f"memory_cfg must be one of {', '.join(map(repr, MEMORY_CFGS))}, a dict of "
                                f"device to one of them, or None (pooled), not {memory_cfg!r}")


def virtual_machine(module: Any, device: Any = None, cuda: bool = False, memory_cfg: str | None = None) -> Any:
    """tvm.runtime.vm.VirtualMachine over a loaded VM library; checks the device fits the library."""
    import tvm
    from tvm.runtime.vm import VirtualMachine

    check_memory_cfg(memory_cfg)
    if module.kind != KIND:
        raise InvalidInputError("this library holds kernels, not a Relax VM: call its functions by name "
                                "(exe['name'] or jitflow.load(path)['name'])")
    dev = device_of(device, cuda)
    on_cpu = dev.dlpack_device_type() == tvm.cpu().dlpack_device_type()
    if cuda and on_cpu:
        raise InvalidInputError(f"this library's kernels run on a CUDA GPU; give a CUDA device, not {dev}")
    if not cuda and not on_cpu:
        raise InvalidInputError(f"this library was built for the CPU ('c' target); give the CPU, not {dev}")
    try:
        return VirtualMachine(module, dev, memory_cfg=memory_cfg)
    except Exception as exc:
        raise LoadError(f"cannot start a VirtualMachine on {dev}: {exc}") from None


def load_vm(path: str | os.PathLike, device: Any = None, memory_cfg: str | None = None,
            device_query: Any = None) -> Any:
    """Load an exported Relax library into a VirtualMachine on `device` (TVM runtime only).

    device: a tvm Device, "cpu", "cuda", "cuda:1" or a torch.device; by default the first GPU
    for a library with CUDA code, else the CPU. memory_cfg: "pooled" (TVM's default) or "naive".
    device_query: how that GPU and its driver are found (runtime.compat; default the CUDA driver).
    """
    from .load import load_library, needs_cuda

    check_memory_cfg(memory_cfg)
    path = Path(path).expanduser()
    if not path.is_file():
        raise LoadError(f"no library at {path}")
    cuda = needs_cuda(path)
    index = _gpu_index(device) if cuda else 0
    return virtual_machine(load_library(path, cuda=cuda, device_query=device_query, device_index=index),
                           device, cuda, memory_cfg)


def _gpu_index(device: Any) -> int:
    """The GPU number `device` names ("cuda:1", a torch.device, a tvm Device), 0 where it names none."""
    if isinstance(device, str):
        tail = device.rsplit(":", 1)[1] if ":" in device else ""
        return int(tail) if tail.isdigit() else 0
    index = getattr(device, "index", None)       # torch.device
    if index is None:
        index = getattr(device, "device_id", None)   # tvm Device
    return index if isinstance(index, int) else 0
