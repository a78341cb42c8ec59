"""One kernel of the CPU benchmark corpus (benchmarks/cpu_corpus.py lists them, benchmarks/cpu_schedules.py
adds TVM's schedules, benchmarks/cpu_timing.py times one): how its module is made, and how its inputs
are filled and its results checked."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

#: how a kernel's float inputs are filled: "normal" (standard normal) or "positive" (0.1 to 4)
FILLS = ("normal", "positive")


@dataclass(frozen=True)
class Kernel:
    """One benchmark kernel: how to make its module, and how its inputs are made and checked."""

    name: str
    make: Callable[[], Any]                   # -> an IRModule whose function "main" is the kernel
    fill: str = "normal"
    sizes: dict[str, int] = field(default_factory=dict)   # symbolic extents and scalar arguments
    rtol: float = 1e-4
    atol: float = 1e-5                        # scaled by the largest magnitude of LLVM's result

    @property
    def group(self) -> str:
        return self.name.split("/", 1)[0]
