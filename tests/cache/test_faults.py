"""Fault, concurrency, corruption, environment and security guarantees, each shown by a test.

Fault runs repeat JITFLOW_FAULT_REPS times (8 in `make test`, 100 in `make soak`); races use 8
processes in `make test` and 16 in `make soak`.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time

import kernels
import lock_holders
import pytest
from conftest import READS, run_python, start_python

import jitflow
from jitflow.cache.store.disk import Cache

#: fault runs (processes killed, disks full, folders read-only, races): `make test-faults`, not `make test`
pytestmark = pytest.mark.slow

SOAK = bool(os.environ.get("JITFLOW_SOAK"))
REPS = int(os.environ.get("JITFLOW_FAULT_REPS", "100" if SOAK else "8"))
RACERS = 16 if SOAK else 8          # processes racing in one test
READ_ROUNDS = 10 if SOAK else 4     # rounds of reads while another process prunes

CHECK = """
    import numpy as np, tvm, jitflow, kernels
    exe = jitflow.compile(kernels.axpb({scale}), "c")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), {scale} + 1)
    info = exe.build_info
    print(info.outcome, round(info.stages.get("wait", 0.0), 3), round(info.total, 3))
"""


def _lock_is_free(cache: Cache, key: str) -> bool:
    from jitflow.cache.store.key_lock import LockTimeout

    try:
        with cache.lock(key, timeout=0):
            return True
    except LockTimeout:
        return False


def _entry_is_absent_or_whole(cache: Cache, key: str) -> bool:
    entry = cache.entry_dir(key)
    return not entry.exists() or cache.lookup(key) is not None


@pytest.mark.slow
def test_sigkill_at_every_stage_leaves_no_partial_entry_and_no_held_lock(cache_dir):
    rng = random.Random(1234)
    stages = ["lower ...", "device ...", "pack ...", "link ...", "store ...", None]   # None: a random moment
    cache = Cache(cache_dir)
    killed_at = []
    for rep in range(REPS):
        stage = stages[rep % len(stages)]
        cuda = stage in ("device ...", "pack ...") or rep % 3 == 0
        make = (f'kernels.vecadd_cuda(threads={32 * (1 + rep % 8)}, n={1024 + 32 * rep})' if cuda
                else f"kernels.axpb({1000.0 + rep})")
        target = '"cuda", arch="sm_90"' if cuda else '"c"'
        code = f"""
            import jitflow, kernels
            exe = jitflow.compile({make}, {target})
            print(exe.key, flush=True)
            exe.export_library(exe.settings.cache_dir.parent / "out{rep}.so")
        """
        proc = start_python(code, env={"JITFLOW_LOG": "debug"})
        key = proc.stdout.readline().strip()
        deadline = time.time() + 120
        if stage is None:
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            for line in proc.stderr:
                if stage in line or time.time() > deadline:
                    break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at.append(stage)
        assert _entry_is_absent_or_whole(cache, key), f"partial entry after a kill at {stage}"
        assert _lock_is_free(cache, key), (f"lock still held after a kill at {stage}: "
                                           f"{lock_holders.describe(cache.locks / f'{key}.lock')}")
        exe = jitflow.compile(eval(make), "cuda", arch="sm_90") if cuda else jitflow.compile(eval(make), "c")
        assert exe.key == key
        exe.export_library(cache_dir.parent / f"after{rep}.so")   # the next build succeeds
    assert len(killed_at) == REPS


@pytest.mark.slow
def test_racing_processes_for_one_key_build_once(cache_dir):
    procs = [start_python(CHECK.format(scale=1500.0)) for _ in range(RACERS)]
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        outcomes.append(out.split()[0])
    assert outcomes.count("built") == 1 and outcomes.count("hit") == RACERS - 1


@pytest.mark.slow
def test_racing_processes_for_their_own_keys_do_not_wait_for_each_other(cache_dir):
    procs = [start_python(CHECK.format(scale=1600.0 + i)) for i in range(RACERS)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        outcome, wait, total = out.split()
        assert outcome == "built"
        # per-key locks: waiting for the lock is a sliver of this process's own build, never another's
        assert float(wait) < 0.5 * (float(total) - float(wait)), out


@pytest.mark.slow
def test_pruning_while_others_read_and_write(cache_dir):
    from jitflow.cache.store import admin as cache_admin

    for i in range(2):
        jitflow.compile(kernels.axpb(1700.0 + i), "c").jit()
    def reader(n: int, base: float) -> str:
        return READS + f"""
    failed = [{base} + i for round in range({READ_ROUNDS}) for i in range({n}) if read({base} + i) != 0]
    print("ok" if not failed else f"failed for {{failed}}")
    """

    procs = [start_python(reader(2, 1700.0)),          # readers of existing entries
             start_python(reader(10, 1710.0))]         # a writer of new entries
    cache = Cache(cache_dir)
    while any(p.poll() is None for p in procs):
        cache_admin.prune(cache, max_size=0, grace=0)
        time.sleep(0.02)
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0 and "ok" in out, err


def _tamper_meta(cache_dir, exe, change):
    meta_path = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key / "meta.json"
    meta = json.loads(meta_path.read_text())
    change(meta)
    meta_path.write_text(json.dumps(meta))


@pytest.mark.parametrize("change", [
    lambda m: m["key_inputs"]["versions"].update(tvm="0.26.0"),
    lambda m: m["key_inputs"]["versions"].update(jitflow="0.0.1"),
    lambda m: m["key_inputs"]["target"].update(archs=["sm_80"]),
    lambda m: m.update(format=999),
], ids=["other-tvm", "other-jitflow", "other-arch", "other-format"])
def test_entries_from_other_versions_or_targets_are_rebuilt(cache_dir, change):
    scale = 1800.0 + random.Random().randint(0, 10**6)
    exe = jitflow.compile(kernels.axpb(scale), "c")
    exe.jit()
    _tamper_meta(cache_dir, exe, change)
    out = run_python(CHECK.format(scale=scale)).stdout.split()
    assert out[0] == "built"


def _mount_tmpfs(path, size="4m"):
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")


def _umount(path):
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_read_only_cache_falls_back_with_one_warning(tmp_path, zig_cache):
    mnt = tmp_path / "ro"
    _mount_tmpfs(mnt)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        scale = 1900.0 + random.Random().randint(0, 10**6) * 2   # the fallback folder outlives the test
        proc = run_python(CHECK.format(scale=scale) + CHECK.format(scale=scale + 1),
                          env={"JITFLOW_CACHE_DIR": str(mnt / "cache"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
        assert proc.stdout.split()[::3] == ["built", "built"]
        warnings = [ln for ln in proc.stderr.splitlines() if "using" in ln and "instead" in ln]
        assert len(warnings) == 1 and str(mnt / "cache") in warnings[0]
    finally:
        _umount(mnt)


def test_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path, zig_cache):
    mnt = tmp_path / "full"
    _mount_tmpfs(mnt, size="16k")
    try:
        proc = run_python(CHECK.format(scale=1950.0), check=False,
                          env={"JITFLOW_CACHE_DIR": str(mnt / "cache"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
        assert proc.returncode != 0
        assert "CacheError" in proc.stderr and "free space" in proc.stderr
        leftovers = [p for p in (mnt / "cache" / "v1" / "staging").iterdir()]
        assert leftovers == [] and not any((mnt / "cache" / "v1" / "entries").rglob("lib.so"))
    finally:
        _umount(mnt)


def test_no_home_directory_falls_back(tmp_path, zig_cache, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = {"HOME": str(blocker / "home"), "JITFLOW_CACHE_DIR": "", "XDG_CACHE_HOME": "",
           "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    proc = run_python(CHECK.format(scale=1960.0 + random.Random().randint(0, 10**6)), env=env)
    assert proc.stdout.split()[0] == "built" and "instead" in proc.stderr


def _fallback_with_seeded_zig_cache(tmp_path, zig_cache):
    """A private temporary folder whose jitflow fallback already has a warm zig cache (zig's first use
    in an empty cache takes tens of seconds), and a configured cache folder that cannot be created."""
    tmp = tmp_path / "tmp"
    fallback = tmp / f"jitflow-{os.getuid()}"
    fallback.mkdir(parents=True, mode=0o700)
    (fallback / "zig").symlink_to(zig_cache, target_is_directory=True)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return {"TMPDIR": str(tmp), "JITFLOW_CACHE_DIR": str(blocker / "cache"), "JITFLOW_ZIG_CACHE_DIR": ""}


@pytest.mark.parametrize("cache", ["on", "off"])
def test_unwritable_cache_folder_still_builds_with_one_warning(tmp_path, zig_cache, cache):
    env = _fallback_with_seeded_zig_cache(tmp_path, zig_cache)
    if cache == "off":
        env["JITFLOW_CACHE"] = "0"
    proc = run_python(CHECK.format(scale=1990.0) + CHECK.format(scale=1991.0), env=env)
    assert proc.stdout.split()[::3] == ["built", "built"]
    warnings = [ln for ln in proc.stderr.splitlines() if "instead" in ln]
    if cache == "off":       # nothing is written under the cache folder (zig's cache is the user's)
        assert warnings == [], proc.stderr
    else:
        assert len(warnings) == 1 and "a-file" in warnings[0], proc.stderr


def test_cache_on_a_path_with_spaces_and_non_ascii(tmp_path, zig_cache):
    env = {"JITFLOW_CACHE_DIR": str(tmp_path / "my cache" / "caché ü"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}
    assert run_python(CHECK.format(scale=1970.0), env=env).stdout.split()[0] == "built"
    assert run_python(CHECK.format(scale=1970.0), env=env).stdout.split()[0] == "hit"


def test_export_to_an_unwritable_place_says_so_and_leaves_nothing(cache_dir, tmp_path):
    mnt = tmp_path / "ro-out"
    _mount_tmpfs(mnt)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        exe = jitflow.compile(kernels.axpb(1980.0), "c")
        with pytest.raises(jitflow.JitflowError, match="cannot write"):
            exe.export_library(mnt / "k.so")
        assert list(mnt.iterdir()) == []
    finally:
        _umount(mnt)


def test_cache_folders_are_private(cache_dir):
    exe = jitflow.compile(kernels.axpb(2000.0), "c")
    exe.jit()
    root = cache_dir / "v1"
    for folder in (root, root / "entries", root / "locks", root / "staging",
                   root / "entries" / exe.key[:2], root / "entries" / exe.key[:2] / exe.key):
        assert folder.stat().st_mode & 0o077 == 0, folder


@pytest.mark.parametrize("attack", ["group-writable", "world-writable-library", "foreign-owner", "symlink"])
def test_unsafe_entries_are_refused_not_loaded(cache_dir, tmp_path, attack):
    scale = 2100.0 + ["group-writable", "world-writable-library", "foreign-owner", "symlink"].index(attack)
    exe = jitflow.compile(kernels.axpb(scale), "c")
    exe.jit()
    entry = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key
    if attack == "group-writable":
        entry.chmod(0o770)
    elif attack == "world-writable-library":
        (entry / "lib.so").chmod(0o777)
    elif attack == "foreign-owner":
        os.chown(entry / "lib.so", 65534, 65534)
    else:
        elsewhere = tmp_path / "planted"
        entry.rename(elsewhere)
        entry.symlink_to(elsewhere, target_is_directory=True)
    assert Cache(cache_dir).lookup(exe.key) is None
    proc = run_python(CHECK.format(scale=scale))
    assert proc.stdout.split()[0] == "built" and "refused" in proc.stderr
    assert Cache(cache_dir).lookup(exe.key) is not None   # the rebuilt entry is ours and safe


def test_kept_sources_and_metadata_are_never_executed(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.axpb(2200.0), "c")
    exe.jit()
    entry = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key
    marker = tmp_path / "pwned"
    (entry / "src" / "host.c").write_text('#error never compiled\n')
    _tamper_meta(cache_dir, exe, lambda m: m.update(functions=[f"__import__('os').system('touch {marker}')"]))
    assert run_python(CHECK.format(scale=2200.0)).stdout.split()[0] == "hit"
    assert not marker.exists()


def test_cuda_builds_are_reproducible(zig_cache, tmp_path):
    code = """
        import jitflow, kernels, hashlib
        exe = jitflow.compile(kernels.matmul_shared(), "cuda", arch=["sm_80", "sm_90"])
        out = exe.export_library(exe.settings.cache_dir.parent / (exe.settings.cache_dir.name + ".so"))
        print(hashlib.sha256(out.read_bytes()).hexdigest())
    """
    digests = {run_python(code, env={"JITFLOW_CACHE_DIR": str(tmp_path / d),
                                     "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}).stdout.strip() for d in ("a", "b")}
    assert len(digests) == 1
