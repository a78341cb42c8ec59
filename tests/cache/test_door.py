"""The cache's one door (cache/door.py): entries from elsewhere are checked, then published as a
build publishes; damaged ones are refused with nothing installed, and a damaged entry never leaves."""
from __future__ import annotations

import json
import os

import kernels
import pytest
from conftest import cache_at, run_python

import jitflow
from jitflow.cache import door
from jitflow.cache.store.disk import Cache
from jitflow.errors import EntryRefusedError

HIT = """
    import numpy as np, tvm, jitflow, kernels
    exe, c = jitflow.compile(kernels.axpb(901.0), "c"), tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.arange(64, dtype="float32")), c)
    np.testing.assert_allclose(c.numpy(), np.arange(64) * 901.0 + 1)
    print(exe.build_info.outcome)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(the entry folder, key, key inputs) of one CPU kernel built once for these tests."""
    folder = tmp_path_factory.mktemp("door")
    with cache_at(folder, zig_cache):
        exe = jitflow.compile(kernels.axpb(901.0), "c")
        exe.build()
        return Cache(folder).entry_dir(exe.key), exe.key, exe.cache_key.inputs


def _installed(cache: Cache) -> list[str]:
    return sorted(p.name for p in cache.entries.glob("*/*"))


def test_an_entry_comes_in_once_and_a_fresh_process_hits_it(built, tmp_path, zig_cache):
    folder, key, inputs = built
    out = door.outgoing(folder, key)
    assert [name for name, _ in out.files][:2] == ["lib.so", "meta.json"]
    assert "last_used" not in dict(out.files)
    cache = Cache(tmp_path / "cache")
    cache.ensure()
    files = {name: data for name, data in out.files if name != "meta.json"}
    first = door.admit(cache, key, files, out.meta, expect=inputs, max_size=1 << 30)
    first.close()
    second = door.admit(cache, key, files, out.meta, expect=inputs)
    second.close()
    assert (first.installed, second.installed) == (True, False)
    assert _installed(cache) == [key] and list(cache.staging_root.iterdir()) == []
    stored = json.loads((cache.entry_dir(key) / "meta.json").read_text())
    assert stored["so_sha256"] == out.meta["so_sha256"] and stored["fetched"] > 0
    from jitflow.cache.store import counters

    assert counters.read(cache.root)["entries_bytes"] > len(files["lib.so"])
    env = {"JITFLOW_CACHE_DIR": str(tmp_path / "cache"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    assert run_python(HIT, env=env).stdout.split() == ["hit"]


def _flip(files):
    lib = bytearray(files["lib.so"])
    lib[200] ^= 1
    return dict(files, **{"lib.so": bytes(lib)}), None


DAMAGE = {
    "a flipped byte in the library": _flip,
    "metadata of another key": lambda f: (f, {"key": "0" * 64}),
    "metadata of another format": lambda f: (f, {"format": 99}),
    "metadata of the wrong shape": lambda f: (f, {"so_size": "12"}),
    "other key inputs": lambda f: (f, {"key_inputs": {"options": {}, "versions": {"tvm": "0.0"}}}),
    "a file an entry does not hold": lambda f: (dict(f, **{"../x": b"outside"}), None),
    "its last_used": lambda f: (dict(f, last_used=b""), None),
    "no library": lambda f: ({k: v for k, v in f.items() if k != "lib.so"}, None),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_refused_and_nothing_installed(built, tmp_path, damage):
    folder, key, inputs = built
    out = door.outgoing(folder, key)
    files = {name: data for name, data in out.files if name != "meta.json"}
    files, change = DAMAGE[damage](files)
    cache = Cache(tmp_path / "cache")
    cache.ensure()
    with pytest.raises(EntryRefusedError, match=key[:12]):
        door.admit(cache, key, files, dict(out.meta, **(change or {})), expect=inputs)
    assert _installed(cache) == [] and list(cache.staging_root.iterdir()) == []
    assert not (tmp_path / "x").exists() and not (cache.staging_root.parent / "x").exists()


def test_a_link_in_a_staged_folder_is_refused(built, tmp_path):
    folder, key, _ = built
    cache = Cache(tmp_path / "cache")
    cache.ensure()
    with cache.staging(key) as staged:
        for name, data in door.outgoing(folder, key).files:
            (staged / name).parent.mkdir(exist_ok=True)
            (staged / name).write_bytes(data)
        os.unlink(staged / "src" / "host.c")
        os.symlink("/etc/passwd", staged / "src" / "host.c")
        with pytest.raises(EntryRefusedError, match="not a file an entry holds"):
            door.admit(cache, key, staged)
    assert _installed(cache) == []


def test_a_damaged_entry_never_leaves(built, tmp_path):
    import shutil

    folder, key, _ = built
    copy = tmp_path / key
    shutil.copytree(folder, copy)
    lib = bytearray((copy / "lib.so").read_bytes())
    lib[200] ^= 1
    (copy / "lib.so").write_bytes(bytes(lib))
    with pytest.raises(EntryRefusedError, match="sha256"):
        door.outgoing(copy, key)
    with pytest.raises(EntryRefusedError, match="not in the cache"):
        door.outgoing(tmp_path / "missing", key)
