"""What a build runs, as data: `exe.inspect()` and `jitflow inspect` gather a Report (gather.py)
from the library and its kept sources: host functions, kernels and launches, parallel launches on
TVM's thread pool (host_code.py with
c_expr.py), device allocations and copies, PTX and SASS (device_text.py), a Relax VM's storage
plan (storage_plan.py) and a Relax model's memory plan per call and at start-up
(memory_plan_gather.py, from the bytecode walk in vm_walk.py). The data types are in types.py
and memory_plan.py, the Report in report.py, the text in text.py and memory_plan_text.py; diff.py
compares two reports.

Public: the report types, inspect_library() and inspect_entry(), diff(), storage_plan() and read_elf().
"""
from ..formats.elf import ElfInfo
from ..formats.elf import read as read_elf
from ..formats.c_expr import Expr
from .diff import ReportDiff, diff
from .gather import inspect_entry, inspect_library
from .memory_plan import ModelConstant, ModelCopy, ModelMemory, ModelStorage, ModelTensor, Totals, VMFunction
from .report import Report, plans_svg
from .storage_plan import Storage, StoragePlan, storage_plan
from .types import Allocation, Copy, FatbinEntry, HostFunction, Kernel, KernelArch, KernelArg, Launch, LibraryFacts
from .types import ParallelLaunch, ParallelLoop

__all__ = ["Allocation", "Copy", "ElfInfo", "Expr", "FatbinEntry", "HostFunction", "Kernel", "KernelArch",
           "KernelArg", "LibraryFacts", "Launch", "ModelConstant", "ModelCopy", "ModelMemory", "ModelStorage",
           "ModelTensor", "ParallelLaunch", "ParallelLoop", "Report", "ReportDiff", "Storage", "StoragePlan",
           "Totals", "VMFunction", "diff", "inspect_entry", "inspect_library", "plans_svg", "read_elf",
           "storage_plan"]
