"""Run-time tracing: what the CUDA driver really does while a model or kernels run (allocations and
releases, copies by direction, memsets, kernel launches), per call and in total, checked against
the static report. CUPTI is read in cupti_source.py only; the rest works on plain events.

Public: trace() (also jitflow.trace), Trace, and the result types.
"""
from .events import CopyEvent, KernelEvent, KernelLaunch, MemoryEvent, MemsetEvent, Window
from .match import Agreement, CallCheck
from .session import Trace, trace
from .summary import Amount, KernelTotal, Segment

__all__ = ["Agreement", "Amount", "CallCheck", "CopyEvent", "KernelEvent", "KernelLaunch", "KernelTotal",
           "MemoryEvent", "MemsetEvent", "Segment", "Trace", "Window", "trace"]
