"""What a build runs, as data: `exe.inspect()` and `jitflow inspect` gather a Report (gather.py)
from the library and its kept sources: host functions, kernels and launches (host_code.py with
c_expr.py), device allocations and copies, PTX and SASS (device_text.py), a Relax VM's storage
plan (storage_plan.py) and a Relax model's memory per call and at start-up (model_view.py, from the
bytecode walk in vm_bytecode.py); text.py and model_text.py print it, diff.py compares two.

Public: the report types (a model's in model_memory.py), inspect_library() and inspect_entry(),
diff(), storage_plan() and read_elf().
"""
from ..formats.elf import ElfInfo
from ..formats.elf import read as read_elf
from .c_expr import Expr
from .diff import ReportDiff, diff
from .gather import inspect_entry, inspect_library
from .model import (
                    Allocation,
                    Copy,
                    FatbinEntry,
                    HostFunction,
                    Kernel,
                    KernelArch,
                    KernelArg,
                    Launch,
                    LibraryFacts,
                    Report,
)
from .model_memory import ModelConstant, ModelCopy, ModelMemory, ModelStorage, ModelTensor, Totals, VMFunction
from .storage_plan import Storage, StoragePlan, storage_plan

__all__ = ["Allocation", "Copy", "ElfInfo", "Expr", "FatbinEntry", "HostFunction", "Kernel", "KernelArch",
           "KernelArg", "LibraryFacts", "Launch", "ModelConstant", "ModelCopy", "ModelMemory", "ModelStorage",
           "ModelTensor", "Report", "ReportDiff", "Storage", "StoragePlan", "Totals", "VMFunction", "diff",
           "inspect_entry", "inspect_library", "read_elf", "storage_plan"]
