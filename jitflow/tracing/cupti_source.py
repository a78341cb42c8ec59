"""The one module that talks to CUPTI, NVIDIA's profiling interface (through the cupti-python
package): it turns on the activity records a trace needs and turns each record into a plain event
(events.py). Everything else in jitflow.tracing works on those events and runs without a GPU.

Records used (cupti-python 13): MEMORY2 (memory_operation_type, memory_kind, bytes, address,
timestamp), MEMCPY (copy_kind, bytes, start, end), MEMSET (bytes, value, start, end) and
CONCURRENT_KERNEL (name, grid_x/y/z, block_x/y/z, dynamic_shared_memory, static_shared_memory,
registers_per_thread, start, end, graph_id: nonzero for a kernel a CUDA graph launched). Times are
CUPTI's nanosecond clock (cupti.get_timestamp()).
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import JitflowError, ToolMissingError
from .events import CopyEvent, Event, KernelEvent, MemoryEvent, MemsetEvent

INSTALL = "pip install 'jitflow[trace]'"
KINDS = ("MEMORY2", "MEMCPY", "MEMSET", "CONCURRENT_KERNEL")
BUFFER_BYTES = 8 << 20
_DIRECTIONS = {"HTOD": "host->device", "DTOH": "device->host", "DTOD": "device->device", "HTOH": "host->host",
               "PTOP": "peer->peer", "HTOA": "host->array", "ATOH": "array->host", "ATOD": "array->device",
               "DTOA": "device->array", "ATOA": "array->array"}
_LOCK = threading.Lock()
_ACTIVE: list[Any] = []          # the source records go to; at most one at a time
_REGISTERED: list[bool] = []     # CUPTI's buffer callbacks are registered once per process


def load_cupti() -> Any:
    """The cupti module, or ToolMissingError naming the extra to install."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise ToolMissingError(f"tracing reads NVIDIA's CUPTI through the cupti-python package, which is not "
                               f"installed ({exc}): {INSTALL}") from None
    return cupti


def _enum_names(enum: Any, fallback: Mapping[int, str]) -> dict[int, str]:
    """Value -> name of a cupti-python enum; the measured values where the enum is missing or unreadable."""
    names = dict(fallback)
    try:
        names.update({int(member): member.name for member in enum})
    except Exception:
        pass
    return names


@dataclass(frozen=True)
class Names:
    """CUPTI's numbered fields by name: record kinds, copy kinds, memory kinds, memory operations."""

    kinds: Mapping[int, str]
    copy_kinds: Mapping[int, str]
    memory_kinds: Mapping[int, str]
    operations: Mapping[int, str]

    @classmethod
    def from_cupti(cls, cupti: Any) -> "Names":
        """The tables of the installed cupti-python (values as measured with 13.0.1 as fallbacks)."""
        return cls(
            _enum_names(getattr(cupti, "ActivityKind", None), {1: "MEMCPY", 2: "MEMSET", 10: "CONCURRENT_KERNEL",
                                                              49: "MEMORY2"}),
            _enum_names(getattr(cupti, "ActivityMemcpyKind", None), {1: "HTOD", 2: "DTOH", 8: "DTOD", 9: "HTOH",
                                                                    10: "PTOP"}),
            _enum_names(getattr(cupti, "ActivityMemoryKind", None), {1: "PAGEABLE", 2: "PINNED", 3: "DEVICE",
                                                                    5: "MANAGED", 6: "DEVICE_STATIC"}),
            _enum_names(getattr(cupti, "ActivityMemoryOperationType", None), {1: "ALLOCATION", 2: "RELEASE"}))


def _int(record: Any, name: str) -> int:
    try:
        return int(getattr(record, name, 0) or 0)
    except (TypeError, ValueError):
        return 0


def to_event(record: Any, names: Names) -> Event | None:
    """The event for one CUPTI activity record, or None for a kind a trace does not use."""
    kind = names.kinds.get(_int(record, "kind"), "")
    if kind == "MEMORY2":
        operation = names.operations.get(_int(record, "memory_operation_type"), "INVALID")
        if operation not in ("ALLOCATION", "RELEASE"):
            return None
        return MemoryEvent(operation.lower(), names.memory_kinds.get(_int(record, "memory_kind"), "UNKNOWN").lower(),
                           _int(record, "bytes"), _int(record, "address"), _int(record, "timestamp"))
    if kind in ("MEMCPY", "MEMCPY2"):
        copy = names.copy_kinds.get(_int(record, "copy_kind"), "UNKNOWN")
        return CopyEvent(_DIRECTIONS.get(copy, copy.lower()), _int(record, "bytes"), _int(record, "start"),
                         _int(record, "end"))
    if kind == "MEMSET":
        return MemsetEvent(_int(record, "bytes"), _int(record, "value"), _int(record, "start"), _int(record, "end"))
    if kind in ("CONCURRENT_KERNEL", "KERNEL"):
        return KernelEvent(str(getattr(record, "name", "") or "?"),
                           (_int(record, "grid_x"), _int(record, "grid_y"), _int(record, "grid_z")),
                           (_int(record, "block_x"), _int(record, "block_y"), _int(record, "block_z")),
                           _int(record, "dynamic_shared_memory"), _int(record, "static_shared_memory"),
                           _int(record, "registers_per_thread"), _int(record, "start"), _int(record, "end"),
                           _int(record, "graph_id"))
    return None


def describe(record: Any) -> dict[str, Any]:
    """Every readable plain field of a record (for diagnostics: what this cupti-python really gives)."""
    out: dict[str, Any] = {}
    for name in dir(record):
        if name.startswith("_") or name in ("ptr",):
            continue
        try:
            value = getattr(record, name)
        except Exception as exc:          # a field this record kind does not have
            value = f"<{type(exc).__name__}>"
        if isinstance(value, (int, float, str)) or value is None:
            out[name] = value
    return out


def _buffer_requested() -> tuple[int, int]:
    return BUFFER_BYTES, 0


def _buffer_completed(activities: Any) -> None:
    with _LOCK:
        source = _ACTIVE[0] if _ACTIVE else None
    if source is not None:
        source.take(activities)


@dataclass(eq=False)
class CuptiSource:
    """CUPTI activity tracing for one trace: start(), now(), sync() after each call, stop() -> events."""

    cupti: Any = field(default_factory=load_cupti)
    events: list[Event] = field(default_factory=list)
    record_counts: Counter = field(default_factory=Counter)   # records seen, by kind name (for diagnostics)
    raw: list[dict[str, Any]] | None = None                    # a list: every record's fields kept (diagnostics)

    def __post_init__(self) -> None:
        self.names = Names.from_cupti(self.cupti)

    def take(self, activities: Any) -> None:
        """Convert a delivered buffer's records now: CUPTI reuses the buffer after the callback returns."""
        for record in activities or ():
            self.record_counts[self.names.kinds.get(_int(record, "kind"), str(_int(record, "kind")))] += 1
            if self.raw is not None:
                self.raw.append(describe(record))
            event = to_event(record, self.names)
            if event is not None:
                self.events.append(event)

    def start(self) -> None:
        with _LOCK:
            if _ACTIVE:
                raise JitflowError("another jitflow trace is running in this process; finish it first")
            _ACTIVE.append(self)
        try:
            if not _REGISTERED:
                self.cupti.activity_register_callbacks(_buffer_requested, _buffer_completed)
                _REGISTERED.append(True)
            for kind in KINDS:
                self.cupti.activity_enable(getattr(self.cupti.ActivityKind, kind))
        except Exception as exc:
            self._release()
            raise JitflowError(f"CUPTI could not start tracing: {exc}. Tracing needs an NVIDIA GPU with its driver, "
                               "and no other profiler (Nsight, torch.profiler) active in the process") from None

    def now(self) -> int:
        """CUPTI's clock, in nanoseconds: the same clock as the records' times."""
        return int(self.cupti.get_timestamp())

    def sync(self) -> None:
        """Wait for the GPU work launched so far, so that a call's records fall inside its window."""
        try:
            from cuda.bindings import driver

            (err,) = driver.cuCtxSynchronize()
            if err == driver.CUresult.CUDA_SUCCESS:
                return
        except Exception:
            pass
        import tvm

        tvm.runtime.device("cuda", 0).sync()

    def stop(self) -> list[Event]:
        """Deliver every pending record, turn the activity kinds off, and return the events."""
        try:
            self.cupti.activity_flush_all(1)
        finally:
            for kind in KINDS:
                try:
                    self.cupti.activity_disable(getattr(self.cupti.ActivityKind, kind))
                except Exception:
                    pass
            self._release()
        return self.events

    def _release(self) -> None:
        with _LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
