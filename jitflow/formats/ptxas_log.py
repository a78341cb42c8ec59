"""Read what ptxas reports per kernel and arch (`-v`) from the device compiler's kept log."""
from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True)
class Resources:
    """ptxas -v figures for one kernel on one arch (bytes, except registers)."""

    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_frame: int | None = None
    static_shared_memory: int | None = None


def parse(log: str) -> dict[tuple[str, str], Resources]:
    """(kernel, arch) -> Resources, from the NVRTC or nvcc log jitflow keeps beside the CUDA source."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = found.setdefault((m.group(1), m.group(2)), {})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = _USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            smem = _SMEM.search(line)
            current["static_shared_memory"] = int(smem.group(1)) if smem else 0
            current = None          # the "Used" line closes the kernel's report
    return {k: Resources(**v) for k, v in found.items()}
