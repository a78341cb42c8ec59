"""`exe.trace(fn, *args, calls=N)`: start the model (or load the kernels) inside a trace and call
`fn` N times, each call in its own window; the trace is checked against exe.inspect()."""
from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from .cupti_source import load_cupti
from .session import Trace, trace

CPU_TARGET = ("exe.trace() measures what the CUDA driver does: device allocations and frees, copies between host "
              "and device, memsets and kernel launches. This build is for the CPU ('c' target), which has none of "
              "them to measure. exe.inspect() lists what a call allocates (the VM's storage, the TIR workspaces) "
              "and copies; build for 'cuda' and run on a GPU to trace it.")


def trace_executable(exe: Any, fn: str, args: tuple[Any, ...], calls: int = 3, device: Any = None,
                     memory_cfg: str | None = None) -> Trace:
    """What exe.trace() does: report, then a trace around the VM's start-up and `calls` calls of fn.

    Each call's result is released before the next call, so that later calls show the steady state
    of TVM's pooled allocator (blocks reused rather than allocated).
    """
    if not exe.target.is_cuda:
        raise InvalidInputError(CPU_TARGET)
    if not isinstance(calls, int) or calls < 1:
        raise InvalidInputError(f"calls must be a positive number of calls, not {calls!r}")
    load_cupti()                            # ToolMissingError before anything is built
    report = exe.inspect()
    exe.jit()                               # built or loaded before the trace starts
    is_vm = report.model is not None
    if not is_vm and (device is not None or memory_cfg is not None):
        raise InvalidInputError("device= and memory_cfg= apply to Relax models; this library holds kernels")
    with trace(report, fn, startup=is_vm) as t:
        if is_vm:
            vm = exe.vm(device, memory_cfg)
            target = vm[fn]
        else:
            target = exe[fn]
        for i in range(calls):
            t.call(target, *args, label=f"call {i + 1}")     # the result is released at once
    return t
