"""Put each device module's fatbin into the imports blob (formats/elf_object.py makes it an object to link).

A device module compiled in pieces (device_compile.py) becomes one device module per piece, each
holding its kernels' entries and fatbin, all imported where the original was: TVM looks a kernel
up in every module the library imports.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..formats import library_blob
from ..formats.library_blob import BlobModule, CudaPayload, LibraryBlob


@dataclass
class DevicePiece:
    """A fatbin and the kernels it holds (empty: all of its module's kernels)."""

    fatbin: bytes
    kernels: list[str]


def with_fatbins(blob: LibraryBlob, fatbins: dict[int, list[DevicePiece]]) -> bytes:
    """The blob with each CUDA module (by index) holding fatbins instead of source: one module per piece."""
    modules = list(blob.modules)
    children = [blob.child_indices[a:b] for a, b in zip(blob.row_ptr, blob.row_ptr[1:])]
    for index, pieces in fatbins.items():
        old = library_blob.parse_cuda_payload(blob.modules[index].payload or b"")
        payloads = [CudaPayload("fatbin", old.fmap_raw, old.kernels, p.fatbin) if not p.kernels
                    else old.subset(p.kernels, "fatbin", p.fatbin) for p in pieces]
        modules[index] = BlobModule("cuda", payloads[0].to_bytes())
        added = list(range(len(modules), len(modules) + len(payloads) - 1))
        modules += [BlobModule("cuda", p.to_bytes()) for p in payloads[1:]]
        children = [[c for child in row for c in ([child, *added] if child == index else [child])]
                    for row in children] + [[] for _ in added]
    row_ptr = [0]
    for row in children:
        row_ptr.append(row_ptr[-1] + len(row))
    tree = blob._replace(row_ptr=row_ptr, child_indices=[c for row in children for c in row], modules=modules)
    return library_blob.serialize(tree)
