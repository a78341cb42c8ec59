"""No library is loaded from a folder another user can change, and what is loaded is what was verified.

The attacks are made by a real second user (a forked child that setuid()s to an unused uid; these
tests need root and are skipped otherwise) and by real processes racing the loader.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm
from conftest import OTHER_UID, as_other_user, needs_root, run_python, start_python

import jitflow
from jitflow.cache.store.disk import Cache
from jitflow.errors import UntrustedFolderError
from jitflow.files import folder_trust
from jitflow.runtime.load import load_library

CHECK = """
    import numpy as np, tvm, jitflow, kernels
    exe = jitflow.compile(kernels.axpb({scale}), "c")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), {scale} + 1)
    print(exe.build_info.outcome)
"""


def _result(module, n: int = 64) -> float:
    c = tvm.runtime.tensor(np.zeros(n, "float32"))
    module.get_function("main", query_imports=True)(tvm.runtime.tensor(np.ones(n, "float32")), c)
    return float(c.numpy()[0])


@pytest.fixture
def sticky_tmp():
    """A folder like /tmp (root's, world-writable, sticky) that another user can reach."""
    base = Path(tempfile.mkdtemp(prefix="jitflow-test-"))
    os.chmod(base, 0o755)
    tmp = base / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    yield tmp
    shutil.rmtree(base, ignore_errors=True)


# --- finding 1: the fallback folder cannot be squatted -----------------------------------------

@needs_root
def test_fallback_folder_squatted_by_another_user_is_never_used(tmp_path, zig_cache, sticky_tmp):
    tmp = sticky_tmp
    squatted = tmp / f"jitflow-{os.getuid()}"

    def squat() -> None:
        squatted.mkdir()
        os.chmod(squatted, 0o777)

    as_other_user(squat)
    blocker = tmp_path / "a-file"
    blocker.write_text("")   # the configured cache folder cannot be created: the fallback is needed
    env = {"TMPDIR": str(tmp), "JITFLOW_CACHE_DIR": str(blocker / "cache"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    proc = run_python(CHECK.format(scale=3100.0), env=env)
    assert proc.stdout.split() == ["built"]
    assert list(squatted.iterdir()) == [], "jitflow wrote into a folder another user owns"
    assert str(squatted) in proc.stderr and "private folder" in proc.stderr
    assert [p for p in tmp.iterdir() if p.name.startswith(f"jitflow-{os.getuid()}-")] == []  # removed at exit


@needs_root
def test_fallback_folder_is_created_private_and_reused(tmp_path, zig_cache, sticky_tmp):
    tmp = sticky_tmp
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {"TMPDIR": str(tmp), "JITFLOW_CACHE_DIR": str(blocker / "cache"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    assert run_python(CHECK.format(scale=3101.0), env=env).stdout.split() == ["built"]
    fallback = tmp / f"jitflow-{os.getuid()}"
    assert fallback.stat().st_mode & 0o777 == 0o700 and fallback.stat().st_uid == os.getuid()
    assert run_python(CHECK.format(scale=3101.0), env=env).stdout.split() == ["hit"]


# --- finding 2: folders on the way, and no window between the check and the load ---------------

@needs_root
@pytest.mark.parametrize("attack", ["other user's folder", "world-writable folder", "v1 of another user",
                                    "link owned by another user"])
def test_a_cache_in_a_folder_another_user_controls_is_never_used_and_the_build_goes_on(tmp_path, attack,
                                                                                        monkeypatch, caplog):
    parent = tmp_path / "parent"
    parent.mkdir()
    cache_dir = parent / "cache"
    planted = tmp_path / "planted"    # what must stay empty: where the untrusted cache's entries would go
    if attack == "other user's folder":
        os.chown(parent, OTHER_UID, OTHER_UID)
        culprit, planted = parent, parent
    elif attack == "world-writable folder":
        os.chmod(parent, 0o777)   # not sticky: anyone may rename what is inside
        culprit, planted = parent, parent
    elif attack == "v1 of another user":
        cache_dir.mkdir(mode=0o700)
        (cache_dir / "v1").mkdir(mode=0o700)
        os.chown(cache_dir / "v1", OTHER_UID, OTHER_UID)
        culprit = planted = cache_dir / "v1"
    else:
        planted.mkdir(mode=0o700)
        os.symlink(planted, cache_dir)
        os.lchown(cache_dir, OTHER_UID, OTHER_UID)
        culprit = cache_dir
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))    # where the fallback folder goes
    caplog.set_level(logging.INFO, logger="jitflow")    # warned once per process, logged at info after
    (tmp_path / "tmp").mkdir()
    exe = jitflow.compile(kernels.axpb(3200.0), "c", cache_dir=cache_dir)
    assert _result(exe.jit()) == 3201.0
    fallback = tmp_path / "tmp" / f"jitflow-{os.getuid()}"
    assert exe.build_info.library.is_relative_to(fallback)
    assert [p.name for p in planted.iterdir()] == [], "jitflow wrote into a folder another user controls"
    (said,) = [r.getMessage() for r in caplog.records if str(fallback) in r.getMessage()]
    assert str(culprit) in said and "JITFLOW_CACHE_DIR" in said and "chmod go-w" in said


def test_builds_with_a_cache_folder_others_can_write_warn_once_and_go_on(tmp_path, zig_cache):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "tmp").mkdir()
    env = {"JITFLOW_CACHE_DIR": str(shared), "TMPDIR": str(tmp_path / "tmp"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    proc = run_python(CHECK.format(scale=3202.0) + CHECK.format(scale=3203.0), env=env)
    assert proc.stdout.split() == ["built", "built"]
    warnings = [ln for ln in proc.stderr.splitlines() if "instead" in ln]
    assert len(warnings) == 1 and f"{shared} is writable by group or others" in warnings[0]
    assert list(shared.iterdir()) == []
    assert run_python(CHECK.format(scale=3202.0), env=env).stdout.split() == ["hit"]   # from the private folder


def test_a_sticky_root_folder_on_the_way_is_accepted(sticky_tmp):
    if os.getuid() != 0:
        pytest.skip("a root-owned sticky folder is made by root")
    cache_dir = sticky_tmp / "mine" / "cache"
    exe = jitflow.compile(kernels.axpb(3201.0), "c", cache_dir=cache_dir)
    assert _result(exe.jit()) == 3202.0


def test_links_are_followed_into_every_folder_they_reach(tmp_path):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    (open_folder / "deep").mkdir(mode=0o700)
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    os.symlink(open_folder / "deep", safe / "hop")
    os.symlink(safe / "hop", safe / "hop2")       # a link to a link into the open folder
    problem = folder_trust.folder_problem(safe / "hop2")
    assert problem is not None and str(open_folder) in problem
    assert folder_trust.folder_problem(safe) is None
    with pytest.raises(UntrustedFolderError, match="writable by group or others"):
        folder_trust.make_private_folder(safe / "hop2" / "cache")


def _build_without_loading(scale: float, tmp_path):
    """The cache entry of axpb(scale), built but never loaded in this process (a library loaded once
    by a path would be handed back by the dynamic loader for that path whatever the file is now)."""
    exe = jitflow.compile(kernels.axpb(scale), "c")
    exe.export_library(tmp_path / f"{scale}.so")
    return exe


def test_verified_library_is_loaded_even_if_the_file_is_swapped_after_the_check(cache_dir, tmp_path):
    good, evil = _build_without_loading(3300.0, tmp_path), _build_without_loading(3301.0, tmp_path)
    cache = Cache(cache_dir)
    entry = cache.entry_dir(good.key)
    found = cache.lookup(good.key)
    assert found is not None
    shutil.copy(cache.entry_dir(evil.key) / "lib.so", entry / "planted.so")
    os.replace(entry / "planted.so", entry / "lib.so")   # between the check and the load
    assert _result(load_library(found[0], cuda=False)) == 3301.0


def test_a_published_build_loads_what_was_hashed_even_if_swapped(cache_dir, tmp_path):
    a, b = _build_without_loading(3302.0, tmp_path), _build_without_loading(3303.0, tmp_path)
    cache = Cache(cache_dir)
    with cache.staging("f" * 64) as folder:   # as a build leaves its folder: lib.so and src/
        shutil.copy(cache.entry_dir(a.key) / "lib.so", folder / "lib.so")
        published = cache.publish("f" * 64, folder, {"functions": ["main"]})
    library = published[0] if isinstance(published, tuple) else published
    final = cache.entry_dir("f" * 64)
    shutil.copy(cache.entry_dir(b.key) / "lib.so", final / "planted.so")
    os.replace(final / "planted.so", final / "lib.so")
    assert _result(load_library(library, cuda=False)) == 3303.0


SWAPPER = """
    import os
    entry, good, evil, stop = {entry!r}, {good!r}, {evil!r}, {stop!r}
    n = 0
    while not os.path.exists(stop):
        for source in (evil, good):
            os.link(source, entry + "/swap")
            os.replace(entry + "/swap", entry + "/lib.so")
        n += 1
    print(n)
"""
LOADED, EVIL, REFUSED = 0, 2, 3


def _look_up_and_load_in_a_child(cache: Cache, key: str) -> int:
    """A new process's lookup and load (forked: nothing loaded or remembered from before)."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            found = cache.lookup(key)
            if found is None:
                status = REFUSED      # it saw the swapped file: refused (a build would follow)
            else:
                status = LOADED if _result(load_library(found[0], cuda=False)) == 3305.0 else EVIL
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.slow
def test_racing_swapper_never_gets_its_library_loaded(cache_dir, tmp_path):
    good, evil = _build_without_loading(3304.0, tmp_path), _build_without_loading(3305.0, tmp_path)
    cache = Cache(cache_dir)
    entry = cache.entry_dir(good.key)
    shutil.copy(entry / "lib.so", tmp_path / "good.so")
    shutil.copy(cache.entry_dir(evil.key) / "lib.so", tmp_path / "evil.so")
    stop = tmp_path / "stop"
    swapper = start_python(SWAPPER.format(entry=str(entry), good=str(tmp_path / "good.so"),
                                          evil=str(tmp_path / "evil.so"), stop=str(stop)))
    outcomes: list[int] = []
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            outcomes.append(_look_up_and_load_in_a_child(cache, good.key))
    finally:
        stop.touch()
        out, err = swapper.communicate(timeout=30)
    assert swapper.returncode == 0 and int(out) > 0, err
    assert outcomes.count(EVIL) == 0 and set(outcomes) <= {LOADED, REFUSED}, outcomes
    assert outcomes.count(LOADED) > 0 and outcomes.count(REFUSED) > 0, outcomes


def test_a_cache_folder_of_ours_that_others_could_write_is_refused_not_narrowed(tmp_path, monkeypatch, caplog):
    """`v1` left open to all (an older umask, a shared setup) may hold anyone's entries and locks:
    builds go to the private fallback folder, and the folder is left for its owner to remove."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cache_dir = tmp_path / "cache"
    Cache(cache_dir).ensure()
    opened = cache_dir / "v1"
    os.chmod(opened, 0o777)
    with pytest.raises(UntrustedFolderError, match="remove that folder"):
        Cache(cache_dir).ensure()
    from jitflow import logs

    logs.forget_warnings()                                     # said once per process: say it here
    with caplog.at_level(logging.WARNING, logger="jitflow"):
        exe = jitflow.compile(kernels.axpb(3402.0), "c", cache_dir=cache_dir)
        assert _result(exe.jit()) == 3403.0
    assert exe.build_info.library.is_relative_to(tmp_path / "tmp" / f"jitflow-{os.getuid()}")
    assert os.stat(opened).st_mode & 0o777 == 0o777 and not any((opened / "entries").rglob("*.so"))
    assert "writable by group or others" in caplog.text
