"""Entries no jitflow wrote, already in a cache or offered by a bundle: metadata that parses but
cannot be shown (a lone surrogate, a time no date can hold) is refused at the door, and the listing
survives one in the cache; a FIFO in place of an entry's file is refused at once, never waited on.

Two CPU kernels are built once for the module; every test changes a copy of that cache.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import stat
import tarfile
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm
from cli_run import build_entries, cache_env, copy_cache, entry_folder, jf, no_traceback

import jitflow
from jitflow.errors import CacheMissError, InvalidInputError

BUILD = """
    import jitflow, kernels
    for scale in (1011.0, 1012.0):
        exe = jitflow.compile(kernels.axpb(scale), "c")
        exe.build()
        print(exe.key)
"""

#: what the metadata of an entry may not hold, though it parses and has every field's type
ODD = {"a lone surrogate in its name": ("name", "odd\ud800name", "lone surrogate"),
       "a creation time past any date": ("created", 1e300, "'created'"),
       "a creation time long before 1970": ("created", -1e18, "'created'")}


class Hung(BaseException):
    """A call that waited past its deadline (a FIFO opened for reading waits for a writer)."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise Hung in the block after `seconds`: a regression fails the test instead of hanging it."""
    def expire(*_):
        raise Hung(f"no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, cache folder, keys) of a cache of two CPU entries built once for these tests."""
    cache = tmp_path_factory.mktemp("odd") / "cache"
    env = cache_env(cache, zig_cache)
    return env, cache, build_entries(env, BUILD)


def _with_meta(folder: Path, field: str, value) -> None:
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[field] = value
    meta_path.write_text(json.dumps(meta))          # "\ud800" written as JSON writes it: an escape


def _result(module, scale: float) -> None:
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    module["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), scale + 1)


# ---- metadata that passes every type check but cannot be shown ----

def _rebundled(bundle: Path, out: Path, field: str, value) -> None:
    """`bundle` with the last entry's meta.json changed, its manifest line made to match."""
    with tarfile.open(bundle) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    manifest = json.loads(members[0][1])
    key = manifest["entries"][-1]["key"]
    name = f"entries/{key}/meta.json"
    changed = []
    for info, data in members[1:]:
        if info.name == name:
            meta = json.loads(data)
            meta[field] = value
            data = json.dumps(meta).encode()
            for line in manifest["entries"][-1]["files"]:
                if line["path"] == "meta.json":
                    line["size"], line["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        changed.append((info, data))
    head = json.dumps(manifest).encode()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in [(tarfile.TarInfo("manifest.json"), head), *changed]:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("case", list(ODD))
def test_unpack_refuses_metadata_that_cannot_be_shown(case, built, tmp_path):
    env, _, keys = built
    field, value, says = ODD[case]
    bundle, odd = tmp_path / "good.tar", tmp_path / "odd.tar"
    assert jf("cache", "pack", str(bundle), "--key", keys[0], "--key", keys[1], env=env).returncode == 0
    _rebundled(bundle, odd, field, value)
    dest = tmp_path / "dest"
    proc = jf("cache", "unpack", str(odd), "--cache-dir", str(dest))
    assert proc.returncode == 2 and no_traceback(proc), (proc.stdout, proc.stderr)
    assert "nothing was installed" in proc.stderr and says in proc.stderr, proc.stderr
    assert not list((dest / "v1" / "entries").iterdir())


@pytest.mark.parametrize("case", list(ODD))
def test_ls_and_prune_survive_an_odd_entry_already_in_the_cache(case, built, tmp_path):
    env, cache, keys = built
    copy = copy_cache(cache, tmp_path / "cache")
    field, value, says = ODD[case]
    _with_meta(entry_folder(copy, keys[1]), field, value)
    mine = dict(env, JITFLOW_CACHE_DIR=str(copy))
    proc = jf("cache", "ls", env=mine)
    assert proc.returncode == 0 and no_traceback(proc), proc.stderr
    assert keys[0][:12] in proc.stdout and keys[1][:12] in proc.stdout      # the rest listed, the odd one marked
    assert f"entry {keys[1][:12]} is refused" in proc.stderr and says in proc.stderr, proc.stderr
    proc = jf("cache", "ls", "--json", env=mine)
    listed = {e["key"]: e for e in json.loads(proc.stdout)["entries"]}
    assert listed[keys[0]]["readable"] and not listed[keys[1]]["readable"] and says in listed[keys[1]]["problem"]
    proc = jf("cache", "prune", "--max-size", "1", "--dry-run", env=mine)
    assert proc.returncode == 0 and no_traceback(proc), proc.stderr
    assert "would remove" in proc.stdout or "would keep" in proc.stdout, proc.stdout
    assert {p.name for p in (copy / "v1" / "entries").glob("*/*")} == set(keys)     # a dry run removes nothing
    # the refused entry is rebuilt when next used, with the right numbers
    exe = jitflow.compile(kernels.axpb(1012.0), "c", cache_dir=copy)
    _result(exe.jit(), 1012.0)
    assert exe.build_info.outcome == "built"


def test_ls_skips_a_folder_that_is_no_entry_and_says_which(built, tmp_path, caplog):
    env, cache, keys = built
    copy = copy_cache(cache, tmp_path / "cache")
    odd = os.path.join(os.fsencode(copy / "v1" / "entries" / keys[0][:2]), b"not-a-key-\xff")
    os.mkdir(odd, 0o700)
    proc = jf("cache", "ls", env=dict(env, JITFLOW_CACHE_DIR=str(copy)))
    assert proc.returncode == 0 and no_traceback(proc), proc.stderr
    assert keys[0][:12] in proc.stdout and keys[1][:12] in proc.stdout
    (said,) = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]     # a warning, on stderr
    assert "not-a-key-\\udcff" in said and "not a cache key" in said
    from jitflow.cli.output import when

    assert when(1e300) == "?" and when(0) == "-"


def test_a_name_that_is_not_valid_text_is_refused_at_compile():
    for bad in ("\ud800", "odd\udcffname"):
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            jitflow.compile(kernels.axpb(1.0), "c", name=bad)


# ---- a FIFO in place of an entry's files ----

@pytest.mark.parametrize("name", ["meta.json", "lib.so"])
def test_a_fifo_in_place_of_an_entry_file_is_refused_without_waiting(name, built, tmp_path):
    env, cache, keys = built
    copy = copy_cache(cache, tmp_path / "cache")
    fifo = entry_folder(copy, keys[0]) / name
    fifo.unlink()
    os.mkfifo(fifo, 0o600)
    mine = dict(env, JITFLOW_CACHE_DIR=str(copy))
    with deadline(30):
        with pytest.raises(CacheMissError, match="not a regular file"):
            jitflow.compile(kernels.axpb(1011.0), "c", cache="readonly", cache_dir=copy).jit()
        proc = jf("cache", "ls", env=mine)
        assert proc.returncode == 0 and no_traceback(proc), proc.stderr
        assert keys[0][:12] in proc.stdout and keys[1][:12] in proc.stdout
        if name == "meta.json":
            assert f"entry {keys[0][:12]} is refused" in proc.stderr and "not a regular file" in proc.stderr
        proc = jf("cache", "pack", str(tmp_path / "out.tar"), "--key", keys[0], env=mine)
        assert proc.returncode == 2 and keys[0] in proc.stderr and no_traceback(proc), proc.stderr
        exe = jitflow.compile(kernels.axpb(1011.0), "c", cache_dir=copy)
        _result(exe.jit(), 1011.0)              # refused, so built again in its place
        assert exe.build_info.outcome == "built"
    assert stat.S_ISREG(os.lstat(fifo).st_mode)
