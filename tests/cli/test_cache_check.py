"""`jitflow cache check` through the real CLI, on real bundles and caches: a good bundle passes; one made
with another cache salt, one whose CUDA entry has no SASS or PTX for the GPU asked about, an entry of
another host or CPU level, or of another tool version fails, naming why; a cache the serving user
cannot read fails for that user (and a real process of that user misses there, where the check says it
would). Reading a bundle installs nothing.

The kernels are built once for the module (a CPU kernel, a CUDA kernel for sm_90 built with NVRTC
without a GPU, one with a cache salt, one at CPU level x86-64-v3, one for the other host).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tarfile
import tempfile
import textwrap
from pathlib import Path

import pytest
from cli_run import build_entries, cache_env, copy_cache, entry_folder, jf, no_traceback
from other_user import other_user

from jitflow.runtime import cpu_features
from jitflow.targets.hosts import machine_host

OTHER_HOST = "aarch64-linux-gnu" if machine_host() == "x86_64-linux-gnu" else "x86_64-linux-gnu"

BUILD = f"""
    import jitflow, kernels
    exes = [jitflow.compile(kernels.axpb(831.0), "c"),
            jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", name="vecadd"),
            jitflow.compile(kernels.axpb(832.0), "c", cache_salt="release-2"),
            jitflow.compile(kernels.axpb(833.0), "c", cpu_level="x86-64-v3"),
            jitflow.compile(kernels.axpb(834.0), "c", host={OTHER_HOST!r})]
    for exe in exes:
        exe.build()
    print(*(exe.key for exe in exes))
"""
CPU, CUDA, SALTED, LEVEL, OTHER = range(5)


def listing(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under `folder` with its mode, size and modification time."""
    return {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, cache folder, keys) of the five entries, built once."""
    cache = tmp_path_factory.mktemp("check") / "cache"
    env = cache_env(cache, zig_cache)
    return env, cache, build_entries(env, BUILD)


def _bundle(built, out: Path, *which: int) -> Path:
    env, _, keys = built
    proc = jf("cache", "pack", str(out), *(f"--key={keys[i]}" for i in which), env=env)
    assert proc.returncode == 0, proc.stderr
    return out


def _check(*args: str, env: dict[str, str] | None = None):
    proc = jf("cache", "check", *args, env=env)
    assert no_traceback(proc), proc.stderr
    return proc


def _row(proc, key: str) -> str:
    return next(line for line in proc.stdout.splitlines() if key[:12] in line)


def test_a_good_bundle_passes_and_nothing_is_installed(built, tmp_path):
    env, cache, keys = built
    bundle = _bundle(built, tmp_path / "good.tar", CPU, CUDA)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    before = listing(cache)
    proc = _check(str(bundle), "--arch", "sm_90", env=dict(env, TMPDIR=str(temporary)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _row(proc, keys[CPU]).startswith("ok") and _row(proc, keys[CUDA]).startswith("ok"), proc.stdout
    assert f"checked 2 entries of {bundle}: 2 will serve here, 0 will not" in proc.stdout
    assert "the bundle was not verified for its origin" in proc.stdout
    # read, never installed: the configured cache is as it was, and the staging folder is gone
    assert listing(cache) == before and list(temporary.iterdir()) == []
    d = json.loads(_check(str(bundle), "--arch", "sm_90", "--json", env=env).stdout)
    assert d["schema"] == "jitflow.cache-check/1" and d["serves"] is True
    assert {e["key"]: (e["serves"], e["inputs"], e["host"], e["access"]) for e in d["entries"]} == \
        {keys[CPU]: (True, [], [], []), keys[CUDA]: (True, [], [], [])}


def test_a_bundle_made_with_another_salt_fails_naming_the_salt(built, tmp_path):
    env, _, keys = built
    bundle = _bundle(built, tmp_path / "salted.tar", CPU, SALTED)
    proc = _check(str(bundle), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _row(proc, keys[CPU]).startswith("ok")
    row = _row(proc, keys[SALTED])
    assert row.startswith("FAILS") and "inputs: options.salt: here (absent), in the bundle release-2" in row, row
    # with the same salt here, the salted entry serves (and the other one fails)
    salted = _check(str(_bundle(built, tmp_path / "only.tar", SALTED)), env=dict(env, JITFLOW_CACHE_SALT="release-2"))
    assert salted.returncode == 0, salted.stdout


def test_a_gpu_without_sass_or_ptx_for_it_fails(built, tmp_path):
    """The CUDA entry holds SASS for sm_90 and PTX compute_90: sm_75 runs neither, sm_120 JITs the PTX."""
    import jitflow

    env, _, keys = built
    bundle = _bundle(built, tmp_path / "cuda.tar", CUDA)
    proc = _check(str(bundle), "--arch", "sm_75", env=env)
    assert proc.returncode == 1, proc.stdout
    row = _row(proc, keys[CUDA])
    assert "host: sm_75 with a driver of CUDA" in row and "SASS for sm_90" in row and "compute_90" in row, row
    assert _check(str(bundle), "--arch", "sm_120", env=env).returncode == 0
    if jitflow.visible_gpu_arch() is None:       # with no --arch, the visible GPU: here there is none
        proc = _check(str(bundle), env=env)
        assert proc.returncode == 1 and "give --arch sm_XY" in proc.stdout, proc.stdout


def test_host_cpu_level_and_tool_versions_are_named(built, tmp_path):
    env, cache, keys = built
    copy = copy_cache(cache, tmp_path / "copy")
    meta_path = entry_folder(copy, keys[CPU]) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["key_inputs"]["versions"]["zig"] = "0.16.0"          # as made by another zig: its library is the same
    meta_path.write_text(json.dumps(meta))
    with cpu_features.simulated(["sse2", "fpu"], "an old CPU"):   # no avx2: x86-64-v3 does not run here
        proc = _check("--cache-dir", str(copy), "--arch", "sm_90", env=env)
    assert proc.returncode == 1
    assert "inputs: versions.zig: here 0.17.1, in the cache 0.16.0" in _row(proc, keys[CPU])
    assert f"host: it is built for {OTHER_HOST}, and this host is {machine_host()}" in _row(proc, keys[OTHER])
    level = _row(proc, keys[LEVEL])
    assert "host: it needs the CPU features" in level and "avx2" in level and "(an old CPU) lacks" in level, level
    assert _row(proc, keys[CUDA]).startswith("ok") and "options.salt" in _row(proc, keys[SALTED])


@pytest.fixture
def top():
    """A folder every user may enter (pytest's own are private), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="jitflow-check-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_private_cache_fails_for_the_user_who_cannot_read_it(built, top):
    env, _, keys = built
    bundle = _bundle(built, top / "b.tar", CPU)
    served = top / "served"
    assert jf("cache", "unpack", str(bundle), "--cache-dir", str(served)).returncode == 0
    proc = _check("--cache-dir", str(served), "--user", "nobody", env=env)
    assert proc.returncode == 1, proc.stdout
    assert f"nobody (uid {pwd.getpwnam('nobody').pw_uid}) cannot read+enter {served / 'v1'}" in proc.stdout and \
        f"--readable, chmod -R go+rX {served}" in proc.stdout, proc.stdout
    assert _check("--cache-dir", str(served), env=env).returncode == 0       # this user may serve it
    readable = copy_cache(served, top / "readable")
    subprocess.run(["chmod", "-R", "go+rX", str(readable)], check=True)
    assert _check("--cache-dir", str(readable), "--user", "nobody", env=env).returncode == 0
    library = entry_folder(readable, keys[CPU]) / "lib.so"
    library.chmod(0o664)
    proc = _check("--cache-dir", str(readable), "--user", "nobody", env=env)
    assert proc.returncode == 1 and f"{library} is writable by group or others" in proc.stdout, proc.stdout
    library.chmod(0o644)
    if os.getuid() == 0:
        _served_by_nobody_as_checked(served, readable)
        subprocess.run(["chown", "-R", "54321", str(readable)], check=True)
        proc = _check("--cache-dir", str(readable), env=env)
        assert proc.returncode == 1 and "belongs to another user" in proc.stdout, proc.stdout


def _served_by_nobody_as_checked(private: Path, readable: Path) -> None:
    """A real read-only process of nobody misses on the cache the check failed and hits on the other."""
    user = other_user()
    code = f"""
        import jitflow, kernels
        from jitflow.errors import CacheMissError
        try:
            jitflow.compile(kernels.axpb(831.0), "c", cache="readonly", cache_dir={str(private)!r}).jit()
            print("private: hit")
        except CacheMissError:
            print("private: miss")
        exe = jitflow.compile(kernels.axpb(831.0), "c", cache="readonly", cache_dir={str(readable)!r})
        exe.jit()
        print("readable:", exe.build_info.outcome)
    """
    proc = user.run(["-c", textwrap.dedent(code)], env=user.env(JITFLOW_RECORD=""))
    assert proc.stdout.split("\n")[:2] == ["private: miss", "readable: hit"], proc.stdout + proc.stderr


def test_in_a_tvm_without_its_compiler_keys_are_not_compared(built, tmp_path):
    env, _, keys = built
    bundle = _bundle(built, tmp_path / "salted.tar", SALTED)
    proc = _check(str(bundle), env=dict(env, TVM_USE_RUNTIME_LIB="1"))
    assert proc.returncode == 0, proc.stdout
    assert "key inputs: not compared: TVM_USE_RUNTIME_LIB=1" in proc.stdout


def test_what_cannot_be_checked_is_bad_input(built, tmp_path):
    env, cache, _ = built
    bundle = _bundle(built, tmp_path / "b.tar", CPU)
    with tarfile.open(bundle) as tar:
        at = next(m for m in tar.getmembers() if m.name.endswith("lib.so")).offset_data + 100
    data = bytearray(bundle.read_bytes())
    data[at] ^= 0xFF
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(bytes(data))
    for args, said in (([str(bundle), "--cache-dir", str(cache)], "not both"),
                       ([str(bundle), "--user", "nobody"], "--user checks who can read an unpacked cache"),
                       (["--cache-dir", str(cache), "--user", "no-such-user-here"], "no local user"),
                       ([str(bundle), "--arch", "sm_7"], "sm_7"),
                       ([str(damaged)], "refusing the bundle")):
        proc = _check(*args, env=env)
        assert proc.returncode == 2 and said in proc.stderr, (args, proc.stderr)
    empty = tmp_path / "empty"
    proc = _check("--cache-dir", str(empty), env=env)
    assert proc.returncode == 1 and "no cache to check" in proc.stdout, proc.stdout


def test_a_driver_older_than_the_entrys_floor_is_named(built):
    """With a driver here (as --arch uses it), an sm_90 entry built for CUDA 13.0 drivers on a CUDA 12.8
    driver: its SASS (CUDA 13) and its PTX (ISA 9.0) both need 13.0."""
    from jitflow.runtime import runs_here
    from jitflow.runtime.library_file import LibraryFile
    from jitflow.targets.cuda_floor import CudaVersion

    _, cache, keys = built
    with LibraryFile.open(entry_folder(cache, keys[CUDA]) / "lib.so") as library:
        old = runs_here.problems(library, machine_host(), runs_here.AssumedGpu("sm_90", CudaVersion(12, 8), "t"),
                                 "13.0")
        assert runs_here.problems(library, machine_host(), runs_here.AssumedGpu("sm_90", CudaVersion(13, 0), "t"),
                                  "13.0") == []
    assert len(old) == 1 and "a driver of CUDA 12.8 runs none of its device code" in old[0], old
    assert "it was built for drivers of CUDA 13.0 or newer" in old[0] and "update the driver" in old[0]
