"""The disk cache: hits across processes, verification before load, one build per key under races."""
from __future__ import annotations

import json

import kernels
import numpy as np
import pytest
import tvm
from conftest import run_python, start_python

import jitflow

HIT_WITHOUT_COMPILER = """
    import numpy as np, tvm, jitflow, kernels, instruments
    mod = kernels.axpb(7.0)
    with instruments.context(instruments.Refuse()):   # any lowering fails
        exe = jitflow.compile(mod, "c")
        a = np.arange(64, dtype="float32")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * 7 + 1)
    print(exe.build_info.outcome, exe.key)
"""


#: a process that builds or loads axpb(scale) on the CPU, checks it against numpy, prints the outcome
AXPB_RUN = """
    import numpy as np, tvm, jitflow, kernels
    exe = jitflow.compile(kernels.axpb({scale}), "c")
    a = np.arange(64, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * {scale} + 1)
    print(exe.build_info.outcome)
"""


def _entry(cache_dir, key):
    return cache_dir / "v1" / "entries" / key[:2] / key


def test_second_process_hits_without_lowering(cache_dir):
    exe = jitflow.compile(kernels.axpb(7.0), "c")
    exe.jit()
    assert exe.build_info.outcome == "built"
    outcome, key = run_python(HIT_WITHOUT_COMPILER).stdout.split()
    assert (outcome, key) == ("hit", exe.key)


def test_entry_holds_library_metadata_and_sources(cache_dir):
    exe = jitflow.compile(kernels.axpb(8.0), "c")
    exe.jit()
    entry = _entry(cache_dir, exe.key)
    meta = json.loads((entry / "meta.json").read_text())
    lib = entry / "lib.so"
    import hashlib

    assert meta["so_sha256"] == hashlib.sha256(lib.read_bytes()).hexdigest()
    assert meta["so_size"] == lib.stat().st_size
    assert meta["versions"]["tvm"] == tvm.__version__ and "zig" in meta["versions"]
    assert meta["functions"] == ["main"] and meta["target"]["kind"] == "c"
    assert meta["created"] > 0 and (entry / "last_used").exists()
    assert "__tvm_ffi_main" in (entry / "src" / "host.c").read_text()
    # nothing is left behind in the staging area
    assert list((cache_dir / "v1" / "staging").iterdir()) == []


def _corrupt_and_rebuild(cache_dir, damage):
    exe = jitflow.compile(kernels.axpb(9.0), "c")
    exe.jit()
    damage(_entry(cache_dir, exe.key))
    assert run_python(AXPB_RUN.format(scale=9.0)).stdout.split() == ["built"]
    # and the rebuilt entry is a hit for the next process
    assert run_python(HIT_WITHOUT_COMPILER.replace("7.0", "9.0").replace("* 7", "* 9")).stdout.split()[0] == "hit"


def test_flipped_bytes_are_rebuilt(cache_dir):
    def flip(entry):
        lib = entry / "lib.so"
        data = bytearray(lib.read_bytes())
        data[len(data) // 2] ^= 0xFF
        lib.write_bytes(bytes(data))
    _corrupt_and_rebuild(cache_dir, flip)


def test_truncated_library_is_rebuilt(cache_dir):
    def truncate(entry):
        lib = entry / "lib.so"
        lib.write_bytes(lib.read_bytes()[:100])
    _corrupt_and_rebuild(cache_dir, truncate)


def test_garbled_or_missing_metadata_is_rebuilt(cache_dir):
    _corrupt_and_rebuild(cache_dir, lambda e: (e / "meta.json").write_text("{not json"))


def test_missing_metadata_is_rebuilt(cache_dir):
    _corrupt_and_rebuild(cache_dir, lambda e: (e / "meta.json").unlink())


@pytest.mark.slow
def test_racing_processes_build_once(cache_dir):
    procs = [start_python(AXPB_RUN.format(scale=11.0)) for _ in range(4)]
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outcomes.append(out.strip())
    assert sorted(outcomes) == ["built", "hit", "hit", "hit"]


def test_in_process_memo_across_executables(cache_dir):
    a = jitflow.compile(kernels.axpb(12.0), "c")
    b = jitflow.compile(kernels.axpb(12.0), "c")
    assert a.jit() is b.jit()
    assert b.build_info.outcome == "memory" and b.functions == ["main"]
    with pytest.raises(jitflow.errors.FunctionNotFoundError, match="'main'"):
        b["mian"]
    x = tvm.runtime.tensor(np.ones(64, "float32"))
    y = tvm.runtime.tensor(np.zeros(64, "float32"))
    b["main"](x, y)
    np.testing.assert_allclose(y.numpy(), 13.0)


#: meta.json that is valid JSON but not an entry's metadata: a field of the wrong type, or nested 100000 deep
WRONG_META = [("created", "yesterday"), ("functions", 5), ("key_inputs", [1]), ("so_size", 1e400),
              ("target", {"archs": [7]}), ("key_inputs", {"options": 5})]


def test_metadata_of_the_wrong_shape_is_refused_and_never_fatal_to_others(cache_dir):
    from jitflow.cache.store import admin
    from jitflow.cache.store.disk import Cache

    exe = jitflow.compile(kernels.axpb(14.0), "c")
    exe.jit()
    meta_path = _entry(cache_dir, exe.key) / "meta.json"
    good, cache = json.loads(meta_path.read_text()), Cache(cache_dir)
    assert cache.lookup(exe.key, exe._cache_key().inputs) is not None
    bad = [json.dumps(dict(good, **{name: value})) for name, value in WRONG_META]
    for text in [*bad, "[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000]:
        meta_path.write_text(text)
        assert cache.lookup(exe.key, exe._cache_key().inputs) is None, text[:60]
        (listed,) = admin.entries(cache)        # listed, not fatal: marked unreadable with the reason
        assert not listed.readable and listed.problem and listed.to_json()["problem"] == listed.problem
    assert "nests deeper than 32 levels" in listed.problem
    meta_path.write_text(bad[0])
    assert admin.entries(cache)[0].problem.startswith("metadata field 'created' is not of its type")
    # another key builds (its automatic prune lists every entry), then the bad entry is rebuilt
    assert run_python(AXPB_RUN.format(scale=15.0)).stdout.split() == ["built"]
    assert run_python(AXPB_RUN.format(scale=14.0)).stdout.split() == ["built"]
    assert json.loads(meta_path.read_text())["created"] > 0
