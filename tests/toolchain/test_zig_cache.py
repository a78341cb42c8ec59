"""zig's cache: one private folder per user, shared by every jitflow cache folder; nothing of zig's own
C library or compiler runtime is built on the way to a first library; a folder that cannot be used
means a private temporary one and one warning."""
from __future__ import annotations

import json
import os
import stat

import pytest
from conftest import run_python

from jitflow.errors import CacheError
from jitflow.toolchain.zig_cc import zig_cache, zig_wheel

BUILD = """
    import numpy as np, tvm, jitflow, kernels
    for mod in [kernels.vecadd(64), kernels.vecadd(64, "float16"), kernels.libm_calls()]:
        exe = jitflow.compile(mod, "c")
        exe.jit()
        print(exe.build_info.outcome)
"""


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_one_private_toolchain_folder_serves_every_cache_folder(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "JITFLOW_ZIG_CACHE_DIR": ""}
    first = run_python(BUILD, env=dict(env, JITFLOW_CACHE_DIR=str(tmp_path / "a")))
    assert first.stdout.split() == ["built"] * 3
    folder = tmp_path / "xdg" / "jitflow" / "toolchain" / f"zig-{zig_wheel.version()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    names = {p.name for p in folder.rglob("*")}
    # zig's glibc stubs, libc_nonshared.a and compiler runtime take seconds to build: none was needed
    assert not any("compiler_rt" in n or "libc_nonshared" in n or n in ("crti.o", "c.s") for n in names), names
    before = _snapshot(folder)
    second = run_python(BUILD, env=dict(env, JITFLOW_CACHE_DIR=str(tmp_path / "b")))
    assert second.stdout.split() == ["built"] * 3
    assert _snapshot(folder) == before                 # the new cache folder set nothing up again
    assert not list((tmp_path / "a").rglob("zig*")) and not list((tmp_path / "b").rglob("zig*"))


def test_an_unusable_folder_means_a_temporary_one_and_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for env in ({"JITFLOW_ZIG_CACHE_DIR": str(blocker / "zig")},                       # cannot be created
                {"JITFLOW_ZIG_CACHE_DIR": "", "HOME": str(blocker / "home"), "XDG_CACHE_HOME": ""}):  # no home
        proc = run_python(BUILD, env=dict(env, JITFLOW_CACHE_DIR=str(tmp_path / f"c{len(env)}")))
        assert proc.stdout.split() == ["built"] * 3
        warnings = [ln for ln in proc.stderr.splitlines() if "zig's cache folder" in ln and "instead" in ln]
        assert len(warnings) == 1, proc.stderr


def test_private_folder_is_created_private_and_tightened(tmp_path):
    made = zig_cache.private_folder(tmp_path / "a" / "b" / "zig")
    assert made == tmp_path / "a" / "b" / "zig"
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in (made, made.parent, made.parent.parent))
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    assert stat.S_IMODE(zig_cache.private_folder(loose).stat().st_mode) == 0o700


def test_private_folder_through_a_link_of_ours(tmp_path):
    real = zig_cache.private_folder(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    assert zig_cache.private_folder(tmp_path / "link").samefile(real)


def test_private_folder_refuses_writable_parents(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(CacheError, match="writable by group or others"):
        zig_cache.private_folder(shared / "zig")
    assert not (shared / "zig").exists()             # refused before creating anything


def test_private_folder_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / "zig").write_text("")
    with pytest.raises(CacheError, match="not a folder"):
        zig_cache.private_folder(tmp_path / "zig")
    with pytest.raises(CacheError, match="cannot create zig's cache folder"):
        zig_cache.private_folder(tmp_path / "zig" / "below")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_private_folder_refuses_another_users_folder(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(CacheError, match="belongs to another user"):
        zig_cache.private_folder(theirs)
    os.chown(tmp_path, 65534, 65534)                  # and any folder above
    try:
        with pytest.raises(CacheError, match="belongs to another user"):
            zig_cache.private_folder(tmp_path / "mine")
    finally:
        os.chown(tmp_path, 0, 0)


@pytest.mark.skipif(os.getuid() != 0, reason="planting a file as another user needs root")
def test_a_folder_of_ours_that_others_could_write_is_refused_not_narrowed(tmp_path, monkeypatch):
    """Once writable by others, a folder may hold anything they put there: narrowed and then trusted,
    a remembered command another user planted would run as this user."""
    from jitflow.errors import UntrustedFolderError
    from jitflow.toolchain.zig_cc import probe_memo, zig

    opened = tmp_path / "zig"
    opened.mkdir()
    marker, program = tmp_path / "ran-as-you", tmp_path / "planted"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    program.chmod(0o755)
    zig._compile_probe.cache_clear()
    monkeypatch.setattr(zig_cache, "_chosen", {})
    source = tmp_path / "k.c"
    source.write_text("int jitflow_opened(int x) { return x * 3; }\n")
    zig.compile_object(source, tmp_path / "k.o", [], "x86_64-linux-gnu", opened, tmp_path / "zl").wait()
    for memo in (opened / probe_memo.FOLDER).glob("*.json"):   # another user rewrites what was ours
        kept = json.loads(memo.read_text())
        kept["frontend"] = [str(program), *kept["frontend"][1:]]
        memo.write_text(json.dumps(kept))
    os.chmod(opened, 0o777)                                    # while the folder is open to all
    with pytest.raises(UntrustedFolderError, match="writable by group or others.*remove that folder"):
        zig_cache.private_folder(opened)
    assert stat.S_IMODE(opened.stat().st_mode) == 0o777        # not narrowed: the user decides
    used = zig_cache.folder(opened)
    assert used != opened and stat.S_IMODE(used.stat().st_mode) == 0o700
    zig._compile_probe.cache_clear()
    job = zig.compile_object(source, tmp_path / "again.o", [], "x86_64-linux-gnu", used, tmp_path / "zl")
    job.wait()
    assert not marker.exists() and b"jitflow_opened" in (tmp_path / "again.o").read_bytes()
    zig._compile_probe.cache_clear()
