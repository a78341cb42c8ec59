"""The one cache opener (cache/store/location.py): where builds go when the configured folder cannot be
used, that every reader of an entry finds it there, and that a build with caching off leaves nothing."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm

import jitflow
from jitflow.report import inspect_entry


def _read_only_folder(path: Path) -> Path:
    """An empty folder on a read-only tmpfs (root can write anywhere else)."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    return path


@pytest.fixture(params=["read-only", "writable by others"])
def unusable_cache(request, tmp_path, zig_cache, monkeypatch):
    """A configured cache folder builds cannot use, and the private fallback folder they use instead."""
    monkeypatch.setenv("JITFLOW_ZIG_CACHE_DIR", str(zig_cache))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    if request.param == "read-only":
        folder = _read_only_folder(tmp_path / "ro")
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(folder)], capture_output=True))
    else:
        folder = tmp_path / "shared"
        folder.mkdir()
        folder.chmod(0o777)
    return folder, tmp_path / "tmp" / f"jitflow-{os.getuid()}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_info_inspect_and_export_read_the_entry_where_it_went(unusable_cache, tmp_path):
    configured, fallback = unusable_cache
    scale = 3400.0 + np.random.default_rng().integers(10**6)
    exe = jitflow.compile(kernels.axpb(scale), "c", cache_dir=configured)
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    assert c.numpy()[0] == scale + 1
    library = exe.build_info.library
    assert exe.build_info.outcome == "built" and library.is_relative_to(fallback)
    rep = exe.inspect()
    assert rep.key == exe.key and rep.library.path == str(library) and rep.build.startswith("hit")
    shipped = exe.export_library(tmp_path / "axpb.so")
    assert _sha256(shipped) == rep.library.sha256 == _sha256(library)
    again = jitflow.compile(kernels.axpb(scale), "c", cache_dir=configured)   # found in this process's memory
    assert again.functions == ["main"] and again.build_info.outcome == "memory"
    third = jitflow.compile(kernels.axpb(scale), "c", cache_dir=configured)
    assert third.build().outcome == "hit" and third.build_info.library == library
    assert inspect_entry(exe.key[:12], configured).library.sha256 == rep.library.sha256   # jitflow inspect KEY
    assert list(configured.iterdir()) == []


def test_with_caching_off_every_way_in_leaves_no_temporary_folder(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    exe = jitflow.compile(kernels.axpb(3500.0), "c", cache=False)
    assert exe.build().outcome == "built" and not exe.build_info.library.exists()
    exe.export_library(tmp_path / "axpb.so")
    exe.inspect()
    with exe.open_library() as got:          # held open: readable while the block lasts
        assert got.library.path.exists() and got.info.outcome == "built" and got.path == got.library.path
        assert got.path.read_bytes() == (tmp_path / "axpb.so").read_bytes()
    assert not got.path.exists()
    exe.jit()
    assert [p.name for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("jitflow-load-")] == []
    assert not cache_dir.exists()
