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


class _OnTheGpu:
    """Work that ran on the GPU from `start` to `end` (ns): placed in a call by its start."""

    start: int
    end: int

    @property
    def time(self) -> int:
        return self.start

    @property
    def duration(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class CopyEvent(_OnTheGpu):
    """A memory copy: its direction, size and when it ran on the GPU."""

    direction: str          # "host->device", "device->host", "device->device", "host->host", "peer->peer", ...
    bytes: int
    start: int
    end: int


@dataclass(frozen=True)
class MemsetEvent(_OnTheGpu):
    bytes: int
    value: int
    start: int
    end: int


@dataclass(frozen=True)
class KernelEvent(_OnTheGpu):
    """A kernel launch as it ran: its name, grid, block, shared memory, registers and times (the one
    type for a launch: a trace's events and each part's launches; KernelLaunch is the same type)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_memory: int
    static_shared_memory: int
    registers: int
    start: int
    end: int
    graph_id: int = 0       # the CUDA graph that launched it (0: launched directly)

    @property
    def kernel(self) -> str:
        return self.name

    @property
    def time_ns(self) -> int:
        return self.duration

    @property
    def replayed(self) -> bool:
        """Whether a CUDA graph launched it (a captured kernel replayed)."""
        return self.graph_id != 0

    def to_json(self) -> dict[str, Any]:
        """The launch as a part of a trace lists it (event_json() gives every field)."""
        return {"kernel": self.name, "grid": list(self.grid), "block": list(self.block),
                "dynamic_shared_memory": self.dynamic_shared_memory, "registers": self.registers,
                "time_ns": self.time_ns, "replayed": self.replayed}


#: A kernel launch in a part of a trace (a call, the start-up): the same type as the event.
KernelLaunch = KernelEvent


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
