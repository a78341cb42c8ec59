"""A CPU model's blob laid out by jitflow (vm_blob.py) is byte for byte what TVM packs, and a tree
it does not know falls back to TVM's packing."""
from __future__ import annotations

import models
import numpy as np
import pytest

from jitflow.builder import vm_blob
from jitflow.formats import library_blob
from jitflow.formats import vm_program as vm_format


def _tvm_packed(root) -> bytes:
    import tvm_ffi

    return np.from_dlpack(tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(root)).tobytes()


@pytest.mark.parametrize("make", [lambda: models.mlp(batch=2, d_in=8, hidden=4, d_out=3),
                                  lambda: models.mlp(batch=4, d_in=300, hidden=257, d_out=10)])
def test_the_blob_is_what_tvm_packs(make):
    import tvm

    root = tvm.compile(make(), target="c").mod
    blob = vm_blob.vm_blob(root)
    assert blob is not None and isinstance(blob.modules[0].payload, memoryview)
    packed = _tvm_packed(root)
    assert library_blob.serialize(blob) == packed
    assert b"".join(bytes(p) for p in library_blob.chunks(blob)) == packed
    payload = blob.modules[0].payload
    from_view, from_bytes = vm_format.parse(payload), vm_format.parse(bytes(payload))
    assert from_view.entry_functions == from_bytes.entry_functions == ["main"]
    assert [c.nbytes for c in from_view.constants if hasattr(c, "nbytes")] == \
           [c.nbytes for c in from_bytes.constants if hasattr(c, "nbytes")]


class _Module:
    def __init__(self, kind, imports=(), fail=False):
        self.kind, self.imports, self.fail = kind, list(imports), fail

    def write_to_file(self, path, fmt):
        if self.fail:
            raise RuntimeError("cannot write")
        with open(path, "wb") as f:
            f.write(self.data)

    data = (0xD225DE2F4214151E).to_bytes(8, "little") + b"executable bytes"


def test_other_trees_and_failures_fall_back_to_tvm_packing():
    c = _Module("c")
    assert vm_blob.vm_blob(_Module(vm_format.KIND, [c])).modules[0].payload.tobytes() == _Module.data
    assert vm_blob.vm_blob(_Module(vm_format.KIND, [c, _Module("cuda")])) is None        # a device module
    assert vm_blob.vm_blob(_Module(vm_format.KIND, [_Module("c", [_Module("cuda")])])) is None
    assert vm_blob.vm_blob(_Module("c")) is None                                          # not a VM
    assert vm_blob.vm_blob(_Module(vm_format.KIND, [c], fail=True)) is None              # TVM failed to write
    other = _Module(vm_format.KIND, [c])
    other.data = b"not an executable this module knows"
    assert vm_blob.vm_blob(other) is None                                                 # another format
