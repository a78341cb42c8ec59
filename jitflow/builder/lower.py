"""IRModule -> TVM's C host source plus the imports blob holding the device modules' CUDA source.

jitflow owns device compilation: while lowering, TVM's CUDA compile callback is replaced by
one that hands the source back untouched, so TVM never runs NVRTC itself, with or without a
CUDA driver on the machine.

A module with Relax functions lowers to a VM executable: the blob's first module is then the
VM's bytecode and constants ("relax.VMExecutable"), which imports the host library ("_lib",
built from the C source), which imports the CUDA modules.
"""
from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Iterator

from ..errors import LibraryFormatError, LoweringError, ScheduleError
from ..formats import library_blob, vm_program
from ..formats.library_blob import CudaPayload, LibraryBlob
from ..inputs import pass_context
from ..inputs.ir_module import is_relax
from ..targets import TargetSpec
from . import memory_facts, vm_blob
from .host_c.codegen import legalized_c_host
from .host_c.source import host_source
from .prepare import check_thread_binding

_CALLBACK = "tvm_callback_cuda_compile"
_DEFERRED = "// jitflow: device code compiled ahead of time\n"
_LOCK = threading.Lock()
NOT_GIVEN: Any = object()
#: what TVM's VM code generator says of a Relax operator that no pass lowered (TVM 0.27)
_VM_CANNOT_EMIT = "CodeGenVM cannot emit this Relax operator"
_ENTRY_RE = re.compile(r"TVM_DLL int32_t __tvm_ffi_([A-Za-z_][A-Za-z0-9_]*)\(void\* self_handle")


@dataclass
class DeviceSource:
    """One CUDA device module: its place in the import tree, its source and its kernel table."""

    index: int
    source: str
    payload: CudaPayload


@dataclass
class Lowered:
    """What lowering produced: host C, the imports blob (or None) and the CUDA sources in it.

    vm_functions is None for a library of kernels; for a Relax VM executable it lists the
    functions a VirtualMachine over the library can call.
    """

    host_c: str
    blob: LibraryBlob | None
    devices: list[DeviceSource] = field(default_factory=list)
    vm_functions: list[str] | None = None
    blob_bytes: bytes | None = None          # the blob as TVM packed it (None: laid out by vm_blob.py)
    pending: Callable[[Lowered], None] | None = field(default=None, repr=False)
    ir: Any = field(default=None, repr=False)  # the IR the memory facts come from (memory_facts.Captured)

    def finish(self) -> Lowered:
        """Pack the imports blob if lowering left that for later (see lower's `defer_pack`)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending(self)
        return self

    def blob_pieces(self) -> list[bytes | memoryview]:
        """The serialized blob as consecutive pieces (for formats.elf_object.write)."""
        if self.blob_bytes is not None:
            return [self.blob_bytes]
        return library_blob.chunks(self.blob) if self.blob is not None else []

    @property
    def is_vm(self) -> bool:
        return self.vm_functions is not None

    def runtime_needs(self) -> list[str]:
        """What of the TVM runtime the library needs beyond its core (for its digest record): "cuda"
        for device code, "contrib" when its host code or its VM calls TVM's contrib functions (sort,
        top-k, random, in libtvm_runtime_extra) by name."""
        names = [self.host_c]
        vm = vm_program.payload_of(self.blob) if self.is_vm and self.blob is not None else None
        if vm is not None:
            names += [f.name for f in vm_program.function_table(vm) if f.kind == "packed"]
        contrib = any("tvm.contrib." in text for text in names)
        return [n for n, needed in (("contrib", contrib), ("cuda", bool(self.devices))) if needed]

    @property
    def functions(self) -> list[str]:
        """Names of the functions the library exports (the VM's functions for a VM), in order."""
        if self.vm_functions is not None:
            return list(self.vm_functions)
        return list(dict.fromkeys(_ENTRY_RE.findall(self.host_c)))


@contextmanager
def _tvm_does_not_compile_cuda() -> Iterator[None]:
    """Replace TVM's CUDA compile callback with one that returns the source, then restore it."""
    import tvm_ffi

    previous = tvm_ffi.get_global_func(_CALLBACK, allow_missing=True)

    def hand_back(code: str, *_args: Any) -> bytes:
        return (_DEFERRED + code).encode()

    with _LOCK:
        tvm_ffi.register_global_func(_CALLBACK, hand_back, override=True)
        try:
            yield
        finally:
            if previous is not None:
                tvm_ffi.register_global_func(_CALLBACK, previous, override=True)
            else:
                tvm_ffi.remove_global_func(_CALLBACK)


def _device_sources(blob: LibraryBlob) -> list[DeviceSource]:
    out = []
    for index, module in enumerate(blob.modules):
        if module.kind != "cuda":
            continue
        payload = library_blob.parse_cuda_payload(module.payload or b"")
        text = payload.data.decode("utf-8", errors="replace")
        if payload.fmt == "cuda":
            source = text
        elif payload.fmt == "ptx" and text.startswith(_DEFERRED):
            source = text[len(_DEFERRED):]
        else:
            raise LibraryFormatError(
                f"TVM compiled the device code itself (format {payload.fmt!r}); jitflow could not take over")
        out.append(DeviceSource(index, source, payload))
    return out


def lower(mod: Any, spec: TargetSpec, pass_config: dict[str, Any] | None = None,
          relax_pipeline: Any = None, caller_context: Any = NOT_GIVEN, defer_pack: bool = False) -> Lowered:
    """Lower with TVM (host 'c'); raise ScheduleError/LoweringError with TVM's message on failure.

    relax_pipeline (Relax modules only): a pipeline name known to tvm.relax.get_pipeline or a
    Pass; None is TVM's default for the target (for CUDA it schedules with dlight's GPU rules).
    caller_context: the PassContext the caller had entered when compiling (None: none), merged
    with pass_config (inputs/pass_context.py); by default the one entered now.
    defer_pack (CPU targets): return once the host C is known and pack the VM's blob (its weights:
    a large model takes tenths of a second) in `Lowered.finish()`, while the host C compiles.
    """
    import tvm

    relax = is_relax(mod)
    if spec.is_cuda and not relax:
        check_thread_binding(mod)
    options = {"relax_pipeline": "default" if relax_pipeline is None else relax_pipeline} if relax else {}
    if caller_context is NOT_GIVEN:
        caller_context = pass_context.caller_context()
    # TVM's C printer gets the host IR legalized (host_c/legalize.py; what it cannot print is raised as
    # a HostCodeError in place of the LoweringError below) and each function's work outlined
    # (host_c/outline.py: on CPU targets every function's, on CUDA hosts where no aliasing is promised)
    with legalized_c_host(every_function=not spec.is_cuda) as printed:
        try:
            with _tvm_does_not_compile_cuda(), pass_context.entered(caller_context, pass_config), \
                    memory_facts.observing() as seen:
                executable = tvm.compile(mod, target=spec.tvm_target(), **options)
        except Exception as exc:
            text = str(exc)
            if "Did you forget to bind" in text or "not bound to" in text:
                raise ScheduleError(f"loops are not bound to GPU threads:\n{text}") from None
            if relax and _VM_CANNOT_EMIT in text:
                raise LoweringError(f"TVM could not lower the module for {spec.describe()}: "
                                    f"{_not_lowered_for_vm(relax_pipeline)}\nTVM said:\n{text}") from None
            raise LoweringError(f"TVM could not lower the module for {spec.describe()}:\n{text}") from None
    root = executable.mod
    if root.kind == vm_program.KIND:
        lowered = _lowered_vm(root, printed.restrict, with_devices=spec.is_cuda or not defer_pack)
    elif root.kind != "c":
        raise LoweringError(f"TVM produced a host module of kind {root.kind!r}, expected 'c'")
    elif not root.imports:
        lowered = Lowered(host_source(root.inspect_source(), printed.restrict), None)
    else:
        blob, raw = _pack(root)
        lowered = Lowered(host_source(root.inspect_source(), printed.restrict), blob, _device_sources(blob),
                          blob_bytes=raw)
    lowered.ir = seen
    return lowered


def _not_lowered_for_vm(relax_pipeline: Any) -> str:
    """Why a Relax pipeline left operators that TVM's VM code generator cannot emit, and the fix."""
    if relax_pipeline == "zero":
        return ("the Relax pipeline 'zero' left Relax operators that the VM cannot run. TVM's 'zero' pipeline "
                "legalizes and fuses the operators (and applies a MetaSchedule database) but does not lower them "
                "for the VM, so it fails alone (in tvm.compile too). Leave relax_pipeline out (TVM's default "
                "pipeline for the target); to apply tuned schedules, run 'zero' on the module before compiling "
                "(with target, database: mod = relax.get_pipeline('zero')(mod)), so that the cache key sees the "
                "scheduled TIR, then jitflow.compile(mod, ...) with the default pipeline. See 'Lowering: the "
                "Relax pipeline' in docs/models.md")
    which = f"the Relax pipeline {relax_pipeline!r}" if isinstance(relax_pipeline, str) else "the Relax pipeline Pass"
    return (f"{which} left Relax operators that the VM cannot run: a pipeline must end with the VM lowering "
            "passes (TVM's relax.get_pipeline('default_build') for a CPU target, or leave relax_pipeline out for "
            "the target's default). See 'Lowering: the Relax pipeline' in docs/models.md")


def _pack(root: Any) -> tuple[LibraryBlob, bytes]:
    import numpy as np
    import tvm_ffi

    packed = tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(root)
    raw = np.from_dlpack(packed).tobytes()      # one copy (Tensor.numpy() makes two)
    return library_blob.parse(raw), raw


def _import_tree(root: Any) -> Iterator[Any]:
    seen: set[int] = set()
    stack = list(root.imports)
    while stack:
        module = stack.pop(0)
        handle = module.__chandle__()
        if handle in seen:
            continue
        seen.add(handle)
        yield module
        stack.extend(module.imports)


def _lowered_vm(root: Any, restrict: AbstractSet[str], with_devices: bool) -> Lowered:
    """A VM executable: the C host module somewhere below it, the whole tree packed into one blob
    (in finish(); devices are only known once packed, so `with_devices` packs before returning)."""
    hosts = [m for m in _import_tree(root) if m.kind == "c"]
    if len(hosts) > 1:
        raise LoweringError(f"the VM executable imports {len(hosts)} C host modules; jitflow builds one")

    def pack(lowered: Lowered) -> None:
        blob, raw = vm_blob.vm_blob(root), None      # the usual CPU tree, without TVM's packing copies
        if blob is None:
            blob, raw = _pack(root)
        payload = vm_program.payload_of(blob)
        if payload is None:
            raise LibraryFormatError("the packed VM executable has no relax.VMExecutable module")
        lowered.blob, lowered.blob_bytes = blob, raw
        lowered.devices = _device_sources(blob)
        lowered.vm_functions = vm_program.parse(payload).entry_functions

    host_c = host_source(hosts[0].inspect_source(), restrict) if hosts else ""
    lowered = Lowered(host_c, None, vm_functions=[], pending=pack)
    return lowered.finish() if with_devices else lowered
