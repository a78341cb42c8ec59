"""A CPU model's library blob without TVM's packing copies.

A model's blob is mostly its weights (46 MB for resnet18). TVM's `ModulePackImportsToTensor`
serializes the VM executable into a string, copies it into the blob, then into a tensor, and
Python copies it once more: several passes over fresh memory while the host C compiles beside
it on the same cores. For the usual CPU tree (the VM executable importing only the C host
library) the blob is three pieces that jitflow can lay out itself: the import tree, the
executable's bytes (TVM writes them once, into memory, through `write_to_file`), and "_lib".

Anything else (a device module, another import, no memfd or /proc) returns None and the caller
packs with TVM as before.
"""
from __future__ import annotations

import logging
import mmap
import os
from typing import Any

from ..formats import vm_program
from ..formats.library_blob import BlobModule, LibraryBlob

log = logging.getLogger("jitflow")


def _simple_tree(root: Any) -> bool:
    """Whether `root` is a VM executable importing exactly one C module that imports nothing."""
    imports = list(root.imports)
    return (root.kind == vm_program.KIND and len(imports) == 1 and imports[0].kind == "c"
            and not list(imports[0].imports))


def executable_bytes(root: Any) -> memoryview | None:
    """The VM executable's serialized bytes (read-only, in memory), or None where that cannot be had."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create("jitflow-vm")   # close-on-exec: zig processes start meanwhile
    except OSError:
        return None
    try:
        root.write_to_file(f"/proc/self/fd/{fd}", "")
        if os.fstat(fd).st_size == 0:
            return None
        return _view(fd)
    except Exception as exc:  # noqa: BLE001 - any failure: TVM's own packing still works
        log.debug("jitflow: writing the VM executable to memory failed (%s); packing with TVM", exc)
        return None
    finally:
        os.close(fd)


def _view(fd: int) -> memoryview:
    """A memoryview over the whole file `fd`, kept mapped for as long as the view lives."""
    return memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))


def vm_blob(root: Any) -> LibraryBlob | None:
    """The blob TVM would pack for `root`, with the executable's bytes as a view, or None (pack with TVM)."""
    if not _simple_tree(root):
        return None
    payload = executable_bytes(root)
    if payload is None or not vm_program.is_vm_executable(payload[:8].tobytes()):
        return None   # not bytes this module knows how to lay out: TVM packs them
    return LibraryBlob(row_ptr=[0, 1, 1], child_indices=[1],
                       modules=[BlobModule(vm_program.KIND, payload), BlobModule("_lib")])
