"""`jitflow build --record FILE` and `--cache readonly`: the command line's record and read-only cache."""
from __future__ import annotations

import json
import os

from cli_run import jf, no_traceback


def listing(folder):
    """Every path under `folder` with its mode, size and modification time."""
    import os

    found = {}
    for root, dirs, files in os.walk(folder):
        for name in ["", *dirs, *files]:
            st = os.lstat(os.path.join(root, name) if name else root)
            found[os.path.relpath(os.path.join(root, name), folder)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found

MODULE = "import kernels\nmod = kernels.axpb(911.0)\nother = kernels.axpb(912.0)\n"


def test_build_records_and_a_readonly_build_hits_or_fails_without_building(tmp_path, zig_cache):
    (tmp_path / "model.py").write_text(MODULE)
    cache, record = tmp_path / "cache", tmp_path / "record.jsonl"
    env = {"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), "JITFLOW_CACHE": "1"}
    spec = f"{tmp_path / 'model.py'}:mod"
    proc = jf("build", spec, "--target", "c", "-o", str(tmp_path / "a.so"), "--record", str(record), env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert line["outcome"] == "built" and line["label"] == spec and line["target"] == "c"

    proc = jf("build", spec, "--target", "c", "-o", str(tmp_path / "b.so"), "--cache", "readonly", env=env)
    assert proc.returncode == 0 and ": hit " in proc.stdout, proc.stderr
    proc = jf("build", f"{tmp_path / 'model.py'}:other", "--target", "c", "-o", str(tmp_path / "c.so"),
              "--cache", "readonly", env=env)
    assert proc.returncode == 3 and no_traceback(proc), proc.stderr
    assert "jitflow: error: the read-only cache" in proc.stderr and "JITFLOW_RECORD" in proc.stderr
    assert not (tmp_path / "c.so").exists()

    proc = jf("build", spec, "--target", "c", "-o", str(tmp_path / "d.so"), "--cache", "readonly", "--no-cache",
              env=env)
    assert proc.returncode == 2 and "contradict" in proc.stderr


def test_cache_info_and_doctor_of_a_readonly_cache_look_and_write_nothing(tmp_path, zig_cache):
    (tmp_path / "model.py").write_text(MODULE)
    cache = tmp_path / "cache"
    env = {"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), "JITFLOW_CACHE": "1"}
    assert jf("build", f"{tmp_path / 'model.py'}:mod", "--target", "c", "-o", str(tmp_path / "a.so"),
              env=env).returncode == 0
    cache.chmod(0o500)         # not writable by its owner (root writes anyway: the listing shows what changed)
    before = listing(cache)
    readonly = dict(env, JITFLOW_CACHE="readonly")
    proc = jf("cache", "info", "--json", env=readonly)
    info = json.loads(proc.stdout)
    assert proc.returncode == 0 and info["readonly"] and info["problem"] is None and info["entries"] == 1
    assert "read-only (JITFLOW_CACHE=readonly" in jf("cache", "info", env=readonly).stdout
    proc = jf("doctor", "--cpu", "--json", env=readonly)
    (check,) = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "cache directory"]
    assert check["ok"] and "read-only" in check["detail"], check
    assert listing(cache) == before
    proc = jf("cache", "info", env=dict(readonly, JITFLOW_CACHE_DIR=str(tmp_path / "nothing")))
    assert proc.returncode == 1 and "does not exist" in proc.stdout and "every lookup is a miss" in proc.stdout
    assert not (tmp_path / "nothing").exists()


def test_commands_that_change_the_cache_refuse_in_readonly_mode_and_doctor_makes_no_zig_cache(tmp_path, zig_cache):
    (tmp_path / "model.py").write_text(MODULE)
    cache = tmp_path / "cache"
    env = {"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), "JITFLOW_CACHE": "1"}
    assert jf("build", f"{tmp_path / 'model.py'}:mod", "--target", "c", "-o", str(tmp_path / "a.so"),
              env=env).returncode == 0
    bundle = tmp_path / "all.tar"
    assert jf("cache", "pack", str(bundle), env=env).returncode == 0
    assert jf("cache", "stats", env=env).returncode == 0
    readonly = dict(env, JITFLOW_CACHE="readonly")
    for entry in (cache / "v1" / "entries").glob("*/*"):
        os.utime(entry, (1e9, 1e9))                   # published long ago: prune may take it
    before = listing(cache)
    for command in (["stats", "--zero"], ["clear", "--yes"], ["prune"], ["prune", "--max-size", "0"],
                    ["unpack", str(bundle), "--cache-dir", str(tmp_path / "other")]):
        proc = jf("cache", *command, env=readonly)
        assert proc.returncode == 3 and no_traceback(proc), (command, proc.stdout, proc.stderr)
        words = " ".join(command[:2] if command[0] == "stats" else command[:1])
        assert f"`jitflow cache {words}` would change the cache" in proc.stderr, proc.stderr
        assert "JITFLOW_CACHE=readonly keeps it for lookups only" in proc.stderr
        assert f"JITFLOW_CACHE=1 jitflow cache {words}" in proc.stderr
    assert listing(cache) == before and not (tmp_path / "other").exists()
    proc = jf("cache", "prune", "--max-size", "0", "--dry-run", env=readonly)     # looks only: allowed
    assert proc.returncode == 0 and "would remove 1 entry" in proc.stdout, proc.stderr
    assert listing(cache) == before
    assert "`cache prune`, `clear`, `unpack` and `stats --zero` refuse" in jf("cache", "info", env=readonly).stdout
    fresh = tmp_path / "zig-never-made"
    proc = jf("doctor", "--cpu", "--json", env=dict(readonly, JITFLOW_ZIG_CACHE_DIR=str(fresh)))
    (check,) = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "zig cache"]
    assert check["ok"] and "not created" in check["detail"] and not fresh.exists(), check
