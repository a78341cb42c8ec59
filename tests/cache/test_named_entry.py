"""An unpacked cache's entries loaded by label or key prefix (jitflow.load_entry, load_vm_entry) in a TVM
without its compiler (TVM_USE_RUNTIME_LIB=1), where no key can be computed: a kernel called and a model
run against numpy, nothing written, no `tvm` and no key module imported; and the read-only cache's rules
applied to the entry a label chose (a damaged or group-writable library is refused, never loaded).

The entries are built once with TVM's compiler, packed and unpacked into a cache as an image gets them.
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import module_cache, run_python

import jitflow
import jitflow.cache
from jitflow.errors import CacheMissError, EntryNotFoundError, InvalidInputError
from jitflow.targets.hosts import machine_host

OTHER_HOST = "aarch64-linux-gnu" if machine_host() == "x86_64-linux-gnu" else "x86_64-linux-gnu"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory, zig_cache):
    """(cache folder, {what: key}) of entries unpacked from a bundle: a kernel named "scale" (and one of that
    name for the other host), two unnamed kernels (both "main"), a model "mlp", and "twice" built for two
    targets (the CPU and sm_90)."""
    import kernels
    import models

    folder = tmp_path_factory.mktemp("named")
    with module_cache(tmp_path_factory, zig_cache, "named-build") as built:
        exes = {"scale": jitflow.compile(kernels.axpb(3.0), "c", name="scale"),
                "scale elsewhere": jitflow.compile(kernels.axpb(3.0), "c", name="scale", host=OTHER_HOST),
                "main 1": jitflow.compile(kernels.axpb(4.0), "c"), "main 2": jitflow.compile(kernels.axpb(5.0), "c"),
                "mlp": jitflow.compile(models.mlp(seed=3), "c", name="mlp"),
                "twice c": jitflow.compile(kernels.vecadd(1024), "c", name="twice"),
                "twice cuda": jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", name="twice")}
        for exe in exes.values():
            exe.build()
        jitflow.cache.pack(folder / "bundle.tar", keys=[e.key for e in exes.values()], cache_dir=built)
    jitflow.cache.unpack(folder / "bundle.tar", cache_dir=folder / "cache")
    return folder / "cache", {what: exe.key for what, exe in exes.items()}


#: a serving process of the smallest image: TVM without its compiler, entries by label, results checked
SERVE = """
    import json, os, sys
    import numpy as np
    import tvm, jitflow, models
    from jitflow.errors import EntryNotFoundError, InvalidInputError
    assert tvm.base._RUNTIME_ONLY
    a, c = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    jitflow.load_entry("scale")["main"](a, c)
    np.testing.assert_allclose(c, a * 3.0 + 1)
    jitflow.load_entry({prefix!r})["main"](a, c)           # a key prefix
    np.testing.assert_allclose(c, a * 5.0 + 1)
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    y = jitflow.load_vm_entry("mlp", "cpu")["main"](x).numpy()
    np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights(seed=3)), rtol=1e-5, atol=1e-5)
    b = np.ones(1024, "float32"); out = np.zeros(1024, "float32")
    jitflow.load_entry("twice", target="c")["main"](b, b, out)
    np.testing.assert_allclose(out, 2.0)
    errors = {{}}
    for name in ("main", "nothing-of-that-name", "twice"):
        try:
            jitflow.load_entry(name)
        except (EntryNotFoundError, InvalidInputError) as exc:
            errors[name] = [type(exc).__name__, str(exc)]
    maps = open("/proc/self/maps").read()
    print(json.dumps({{"errors": errors, "compiler": "libtvm_compiler" in maps,
                      "keyed": sorted(m for m in ("jitflow.cache.key.key", "jitflow.executable", "jitflow.builder")
                                      if m in sys.modules)}}))
"""


def _listing(folder) -> dict:
    return {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def test_entries_load_by_label_in_a_tvm_without_its_compiler(unpacked):
    cache, keys = unpacked
    before = _listing(cache)
    proc = run_python(SERVE.format(prefix=keys["main 2"][:8]),
                      env={"TVM_USE_RUNTIME_LIB": "1", "JITFLOW_CACHE_DIR": str(cache), "JITFLOW_CACHE": "readonly",
                           "JITFLOW_RECORD": ""})
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["compiler"] is False and out["keyed"] == [], out
    kind, text = out["errors"]["main"]
    assert kind == "InvalidInputError" and "'main' stands for 2 entries" in text
    assert keys["main 1"][:12] in text and keys["main 2"][:12] in text and keys["scale"][:12] not in text
    kind, text = out["errors"]["nothing-of-that-name"]
    assert kind == "EntryNotFoundError" and f"{keys['mlp'][:12]} mlp (c for {machine_host()})" in text, text
    kind, text = out["errors"]["twice"]
    assert kind == "InvalidInputError" and "target='c' or 'cuda'" in text, text
    assert _listing(cache) == before


def test_the_label_chooses_the_key_and_the_read_only_lookup_checks_it(unpacked, tmp_path):
    cache, keys = unpacked
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy, symlinks=True)
    library = copy / "v1" / "entries" / keys["scale"][:2] / keys["scale"] / "lib.so"
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0x01
    library.write_bytes(bytes(data))
    with pytest.raises(CacheMissError, match="library sha256 mismatch"):
        jitflow.load_entry("scale", cache_dir=copy)
    other = copy / "v1" / "entries" / keys["main 1"][:2] / keys["main 1"] / "lib.so"
    other.chmod(0o664)
    with pytest.raises(CacheMissError, match="writable by group or others"):
        jitflow.load_entry(keys["main 1"][:10], cache_dir=copy)
    with pytest.raises(InvalidInputError, match="this library holds kernels, not a Relax VM"):
        jitflow.load_vm_entry(keys["main 2"], cache_dir=copy)
    with pytest.raises(EntryNotFoundError, match="no cache at"):
        jitflow.load_entry("scale", cache_dir=tmp_path / "nothing-here")
    with pytest.raises(EntryNotFoundError, match="built for another host or target"):
        jitflow.load_entry(keys["scale elsewhere"][:12], cache_dir=copy)
    assert jitflow.load_vm_entry("mlp", cache_dir=copy) is not None
