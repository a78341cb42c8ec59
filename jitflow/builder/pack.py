"""Put each device module's fatbin into the imports blob and emit it as an assembly file to link."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..formats import library_blob
from ..formats.library_blob import BlobModule, CudaPayload, LibraryBlob

_ASM = """\
    .section .rodata.tvm_ffi_library_bin,"a"
    .globl {symbol}
    .type {symbol}, %object
    .p2align 4
{symbol}:
    .incbin "{blob}"
    .size {symbol}, . - {symbol}
    .section .note.GNU-stack,"",%progbits
"""


def with_fatbins(blob: LibraryBlob, fatbins: dict[int, bytes]) -> bytes:
    """The blob with each CUDA module (by index) holding its fatbin instead of source."""
    modules = []
    for index, module in enumerate(blob.modules):
        if index in fatbins:
            old = library_blob.parse_cuda_payload(module.payload or b"")
            new = CudaPayload("fatbin", old.fmap_raw, old.kernels, fatbins[index])
            modules.append(BlobModule(module.kind, new.to_bytes()))
        else:
            modules.append(module)
    return library_blob.serialize(replace(blob, modules=modules))


def write_blob_asm(blob: bytes, folder: Path) -> Path:
    """Write blob.bin and blob.S (which embeds it as the symbol TVM's loader looks for)."""
    (folder / "blob.bin").write_bytes(blob)
    asm = folder / "blob.S"
    asm.write_text(_ASM.format(symbol=library_blob.SYMBOL, blob="blob.bin"))
    return asm
