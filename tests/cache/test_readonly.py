"""The read-only cache (JITFLOW_CACHE=readonly, cache="readonly"): hits as usual, a miss is a
CacheMissError, and nothing under the cache folder (nor zig's) is created, changed or removed: on a
folder of one's own, on a read-only mount, and as another user on a folder root owns."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm
from conftest import module_cache, needs_root, run_python
from other_user import other_user

import jitflow
from jitflow.cache.shared import backend
from jitflow.errors import CacheMissError


def listing(folder: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every path under `folder` (itself included) with its type and mode, size, modification time
    and owner: what a run that writes nothing leaves exactly as it was."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in ["", *dirs, *files]:
            path = os.path.join(root, name) if name else root
            st = os.lstat(path)
            found[os.path.relpath(path, folder)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid)
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """A cache holding axpb(11) and axpb(12), each used once since (counters and last use written)."""
    with module_cache(tmp_path_factory, zig_cache, "readonly-source") as cache:
        for scale in (11.0, 12.0):
            jitflow.compile(kernels.axpb(scale), "c").build()
            jitflow.compile(kernels.axpb(scale), "c").build()
        yield cache


def _copy(built: Path, dest: Path) -> Path:
    shutil.copytree(built, dest, symlinks=True)      # modes and times kept
    return dest


#: a readonly process: two hits (jit and call, build and export), one miss; what it obtained
RUN = """
    import json, os, sys, tempfile
    import numpy as np, tvm, jitflow, kernels
    from jitflow.errors import CacheMissError
    a = tvm.runtime.tensor(np.ones(64, "float32"))
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe = jitflow.compile(kernels.axpb(11.0), "c")
    exe["main"](a, c)
    assert (c.numpy() == 12).all(), c.numpy()
    outcomes = [exe.build_info.outcome]
    exe = jitflow.compile(kernels.axpb(12.0), "c")
    outcomes.append(exe.build().outcome)
    path = exe.export_library(os.path.join(tempfile.mkdtemp(), "k.so"))
    jitflow.load(path)["main"](a, c)
    assert (c.numpy() == 13).all(), c.numpy()
    missing = jitflow.compile(kernels.axpb(13.0), "c")
    try:
        missing.jit()
        error = None
    except CacheMissError as exc:
        error = str(exc)
    heavy = sorted(m for m in sys.modules if m.split(".")[:2] == ["jitflow", "builder"] or m in (
        "jitflow.toolchain.zig_cc.zig", "jitflow.toolchain.zig_cc.zig_direct", "jitflow.toolchain.zig_cc.link", "jitflow.toolchain.cuda.nvrtc"))
    print(json.dumps({"outcomes": outcomes, "error": error, "missing": missing.key, "heavy": heavy}))
"""


def _check_run(stdout: str, cache: Path) -> None:
    got = json.loads(stdout.splitlines()[-1])
    assert got["outcomes"] == ["hit", "hit"]
    assert got["error"] and got["missing"] in got["error"], got["error"]
    assert f"the read-only cache {cache} has no entry for key" in got["error"]
    assert "module main, target c for" in got["error"] and "jitflow cache pack" in got["error"]
    assert got["heavy"] == []          # neither the builder nor zig was so much as imported


def _env(cache: Path, zig: Path, **more: str) -> dict[str, str]:
    return {"JITFLOW_CACHE": "readonly", "JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig),
            "JITFLOW_PROGRESS": "0", **more}


def test_a_readonly_process_hits_misses_and_writes_nothing(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    before = listing(cache)
    zig, record = tmp_path / "zig-never", tmp_path / "record.jsonl"
    proc = run_python(RUN, env=_env(cache, zig, JITFLOW_RECORD=str(record)))
    _check_run(proc.stdout, cache)
    assert listing(cache) == before                 # no counter, no last use, no lock, no staging
    assert not zig.exists()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["outcome"] for line in lines] == ["hit", "hit"]     # a miss obtained nothing


def test_readonly_on_a_missing_folder_creates_nothing(tmp_path):
    cache = tmp_path / "nothing" / "here"
    with pytest.raises(CacheMissError, match="does not exist"):
        jitflow.compile(kernels.axpb(11.0), "c", cache="readonly", cache_dir=cache).build()
    assert not (tmp_path / "nothing").exists()


def _read_only_mount(path: Path, source: Path) -> Path:
    """`source` copied onto a tmpfs at `path`, then mounted read-only (skip where mounting is impossible)."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    for item in source.iterdir():
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, path / item.name)
    shutil.copystat(source, path)
    if subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
        pytest.skip("cannot remount the tmpfs read-only")
    return path


def test_readonly_on_a_read_only_mount_hits_and_misses_without_a_fallback(built, tmp_path, request):
    cache = _read_only_mount(tmp_path / "ro", built)
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(cache)], capture_output=True))
    before = listing(cache)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    proc = run_python(RUN, env=_env(cache, tmp_path / "zig-never", TMPDIR=str(temporary)))
    _check_run(proc.stdout, cache)
    assert listing(cache) == before
    # no private fallback folder was made to build the miss in (the export's own folder is all there is)
    assert not [p for p in temporary.iterdir() if p.name.startswith("jitflow-")]


def test_readonly_as_another_user_on_a_folder_root_owns(built):
    """A cache unpacked by root (an image's build step) and served by a user who may only read it
    (the checkout reached through other_user: a clone in a private folder works too)."""
    user = other_user()
    top = Path(tempfile.mkdtemp(prefix="jitflow-readonly-test-"))
    try:
        top.chmod(0o755)
        cache = _copy(built, top / "cache")
        subprocess.run(["chmod", "-R", "go+rX", str(cache)], check=True)
        before = listing(cache)
        env = user.env(HOME=str(top / "no-home"), **_env(cache, top / "zig-never"))
        proc = user.run(["-c", textwrap.dedent(RUN)], env=env, cwd=top)
        assert proc.returncode == 0, proc.stderr
        _check_run(proc.stdout, cache)
        assert listing(cache) == before and not (top / "zig-never").exists()
    finally:
        shutil.rmtree(top, ignore_errors=True)


@needs_root
def test_a_folder_another_user_owns_is_refused_in_readonly_too(built, tmp_path):
    """Only this user's and root's folders are trusted: another user could swap the code loaded."""
    cache = _copy(built, tmp_path / "cache")
    subprocess.run(["chown", "-R", "54321", str(cache)], check=True)
    before = listing(cache)
    with pytest.raises(CacheMissError, match="belongs to another user"):
        jitflow.compile(kernels.axpb(11.0), "c", cache="readonly", cache_dir=cache).build()
    assert listing(cache) == before


def test_a_damaged_entry_is_a_miss_that_says_why_and_is_left_alone(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    exe = jitflow.compile(kernels.axpb(11.0), "c", cache="readonly", cache_dir=cache)
    library = next(cache.glob(f"v1/entries/*/{exe.key}/lib.so"))
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0x40
    library.write_bytes(bytes(data))
    os.utime(library, ns=(1, 1))
    before = listing(cache)
    with pytest.raises(CacheMissError, match=f"{exe.key}.*its entry was refused: .*sha256"):
        exe.build()
    assert listing(cache) == before


class DictBackend(backend.RemoteBackend):
    """A shared tier in this process's memory (JITFLOW_REMOTE_CACHE=module:Class)."""

    data: dict[str, bytes] = {}

    def get(self, name):
        return self.data.get(name)

    def put(self, name, data, ttl=None):
        self.data[name] = data

    def acquire(self, name, token, ttl):
        return self.data.setdefault(name, token.encode()) == token.encode()

    def renew(self, name, token, ttl):
        return self.data.get(name) == token.encode()

    def release(self, name, token):
        if self.data.get(name) == token.encode():
            del self.data[name]


def test_the_shared_tier_is_read_and_nothing_is_stored_locally(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", f"{__name__}:DictBackend")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", "a secret of the cluster")
    DictBackend.data.clear()
    assert jitflow.compile(kernels.axpb(15.0), "c").build().outcome == "built"      # shared by its builder
    served = tmp_path / "served"
    served.mkdir(mode=0o700)
    before, tier_before = listing(served), dict(DictBackend.data)
    exe = jitflow.compile(kernels.axpb(15.0), "c", cache="readonly", cache_dir=served)
    a, c = tvm.runtime.tensor(np.ones(64, "float32")), tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](a, c)
    assert exe.build_info.outcome == "shared" and (c.numpy() == 16).all()
    assert listing(served) == before
    assert not Path(exe.build_info.library).exists()            # its private copy went with the library
    assert DictBackend.data == tier_before          # no lock taken, nothing sent
    with pytest.raises(CacheMissError):
        jitflow.compile(kernels.axpb(16.0), "c", cache="readonly", cache_dir=served).build()
    assert listing(served) == before
