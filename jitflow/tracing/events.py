"""What the CUDA driver did, as plain data: the events a trace collects (one per CUPTI record it
keeps) and the call windows that split them. Nothing here needs CUPTI or a GPU."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Union


@dataclass(frozen=True)
class MemoryEvent:
    """A device memory allocation or release (cudaMalloc, cudaFree, ...)."""

    operation: str          # "allocation" or "release"
    memory_kind: str        # "device", "device_static" (a module's globals), "pinned", "managed", ...
    bytes: int
    address: int
    time: int               # ns, CUPTI's clock


@dataclass(frozen=True)
class CopyEvent:
    """A memory copy: its direction, size and when it ran on the GPU."""

    direction: str          # "host->device", "device->host", "device->device", "host->host", "peer", ...
    bytes: int
    start: int
    end: int

    @property
    def time(self) -> int:
        return self.start


@dataclass(frozen=True)
class MemsetEvent:
    bytes: int
    value: int
    start: int
    end: int

    @property
    def time(self) -> int:
        return self.start


@dataclass(frozen=True)
class KernelEvent:
    """A kernel launch as it ran: its name, grid, block, shared memory, registers and times."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_memory: int
    static_shared_memory: int
    registers: int
    start: int
    end: int

    @property
    def time(self) -> int:
        return self.start


Event = Union[MemoryEvent, CopyEvent, MemsetEvent, KernelEvent]


@dataclass(frozen=True)
class Window:
    """One traced call: its label and the CUPTI clock at its start and after its work finished."""

    label: str
    start: int
    end: int


def event_json(event: Event) -> dict[str, Any]:
    """An event as JSON, with its type."""
    return {"type": type(event).__name__.replace("Event", "").lower(), **asdict(event)}
