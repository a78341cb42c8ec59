"""`jitflow cache pack` and `unpack` through the real CLI: bundles of real entries, unpacked into
another cache and hit by a fresh process, and hostile bundles (crafted with tarfile) refused whole.

Three CPU kernels are built once for the module; every test packs or unpacks into folders of its own.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cli_run import build_entries, cache_env, copy_cache, entry_folder, jf, no_traceback
from conftest import ROOT, TESTS, run_python

BUILD = """
    import jitflow, kernels
    exes = [jitflow.compile(kernels.axpb(811.0), "c"), jitflow.compile(kernels.axpb(812.0), "c"),
            jitflow.compile(kernels.sigmoid(), "c")]
    for exe in exes:
        exe.build()
    print(*(exe.key for exe in exes))
"""

#: a fresh process on the unpacked cache: each kernel is a hit, with the right numbers
HITS = """
    import numpy as np, tvm, jitflow, kernels
    a = tvm.runtime.tensor(np.linspace(-2, 2, 64, dtype="float32"))
    for scale in (811.0, 812.0):
        exe, c = jitflow.compile(kernels.axpb(scale), "c"), tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](a, c)
        assert exe.build_info.outcome == "hit", exe.build_info
        np.testing.assert_allclose(c.numpy(), scale * a.numpy() + 1, rtol=1e-6)
    exe, c = jitflow.compile(kernels.sigmoid(), "c"), tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](a, c)
    assert exe.build_info.outcome == "hit", exe.build_info
    np.testing.assert_allclose(c.numpy(), 1 / (1 + np.exp(-a.numpy())), rtol=1e-5)
    print("ok")
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, cache folder, keys) of a cache of three CPU entries built once for these tests."""
    cache = tmp_path_factory.mktemp("bundle") / "cache"
    env = cache_env(cache, zig_cache)
    return env, cache, build_entries(env, BUILD)


@pytest.fixture(scope="module")
def bundle(built, tmp_path_factory) -> Path:
    """A bundle of every entry of the built cache."""
    env, _, _ = built
    out = tmp_path_factory.mktemp("packed") / "all.tar"
    proc = jf("cache", "pack", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    return out


def _members(path: Path) -> list[str]:
    return subprocess.run(["tar", "-tf", str(path)], capture_output=True, text=True, check=True).stdout.split()


def _installed(cache: Path) -> list[str]:
    entries = cache / "v1" / "entries"
    return sorted(p.name for p in entries.glob("*/*")) if entries.exists() else []


def test_pack_all_is_a_tar_that_tar_lists(bundle, built):
    _, cache, keys = built
    names = _members(bundle)
    assert names[0] == "manifest.json"
    for key in keys:
        assert {f"entries/{key}/lib.so", f"entries/{key}/meta.json", f"entries/{key}/src/host.c"} <= set(names)
    assert not any(n.endswith("last_used") for n in names)
    with tarfile.open(bundle) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        assert manifest["format"] == "jitflow.bundle" and manifest["version"] == 1
        for e in manifest["entries"]:
            for f in e["files"]:
                assert tar.getmember(f"entries/{e['key']}/{f['path']}").size == f["size"]
                assert (cache / "v1" / "entries" / e["key"][:2] / e["key"] / f["path"]).stat().st_size == f["size"]
    assert sorted(e["key"] for e in manifest["entries"]) == sorted(keys)
    assert {e["target"] for e in manifest["entries"]} == {"c for x86_64-linux-gnu"}


def test_pack_by_key_and_by_record(built, tmp_path):
    env, _, keys = built
    one = tmp_path / "one.tar"
    proc = jf("cache", "pack", str(one), "--key", keys[1], "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["schema"] == "jitflow.cache-pack/1" and [e["key"] for e in d["entries"]] == [keys[1]]
    assert d["bytes"] == one.stat().st_size
    assert {n.split("/")[1] for n in _members(one)[1:]} == {keys[1]}
    record = tmp_path / "record.jsonl"
    lines = [{"key": keys[0], "label": "main", "target": "c", "outcome": "built", "time": 1.0, "jitflow": "0.1.0"},
             {"key": keys[2], "label": "main", "target": "c", "outcome": "hit", "time": 2.0, "jitflow": "0.1.0"},
             {"key": keys[0], "label": "main", "target": "c", "outcome": "hit", "time": 3.0, "jitflow": "0.1.0"}]
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    two = tmp_path / "two.tar"
    proc = jf("cache", "pack", str(two), "--manifest", str(record), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "packed 2 entries" in proc.stdout
    assert sorted({n.split("/")[1] for n in _members(two)[1:]}) == sorted([keys[0], keys[2]])


def test_pack_refuses_a_missing_key_and_a_bad_record_line(built, tmp_path):
    env, _, keys = built
    out = tmp_path / "out.tar"
    proc = jf("cache", "pack", str(out), "--key", keys[0], "--key", "ab" * 32, env=env)
    assert proc.returncode == 2 and no_traceback(proc) and "ab" * 32 in proc.stderr
    assert not out.exists() and os.listdir(tmp_path) == []
    record = tmp_path / "record.jsonl"
    record.write_text(json.dumps({"key": keys[0]}) + "\n" + json.dumps({"key": "not a key"}) + "\n")
    proc = jf("cache", "pack", str(out), "--manifest", str(record), env=env)
    assert proc.returncode == 2 and no_traceback(proc) and "line 2" in proc.stderr
    assert not out.exists()


def test_unpack_into_an_empty_cache_then_a_fresh_process_hits(bundle, built, tmp_path, zig_cache):
    _, _, keys = built
    dest = tmp_path / "elsewhere" / "cache"
    proc = jf("cache", "unpack", str(bundle), "--cache-dir", str(dest), "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["schema"] == "jitflow.cache-unpack/1" and sorted(d["installed"]) == sorted(keys) and d["skipped"] == []
    assert d["entries"] == 3 and d["bytes"] > 0
    assert _installed(dest) == sorted(keys)
    assert list((dest / "v1" / "staging").iterdir()) == []
    run_python(HITS, env=cache_env(dest, zig_cache))
    again = jf("cache", "unpack", str(bundle), "--cache-dir", str(dest))
    assert again.returncode == 0, again.stderr
    assert "installed 0 entries" in again.stdout and "skipped 3 already present" in again.stdout


def test_unpack_through_the_python_api(bundle, built, tmp_path):
    import jitflow.cache

    _, _, keys = built
    result = jitflow.cache.unpack(bundle, cache_dir=tmp_path / "cache")
    assert sorted(result.installed) == sorted(keys) and result.skipped == []
    packed = jitflow.cache.pack(tmp_path / "again.tar", keys=[keys[0]], cache_dir=tmp_path / "cache")
    assert [e.key for e in packed.entries] == [keys[0]] and packed.bytes == (tmp_path / "again.tar").stat().st_size


# ---- hostile bundles: each is the good bundle with one change, made to the last entry's members ----

def _read(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]


def _write(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None and info.isreg() else None)


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, None


def _last_entry(members) -> str:
    return members[-1][0].name.split("/")[1]


def _flip(members):
    key = _last_entry(members)
    out = []
    for info, data in members:
        if info.name == f"entries/{key}/lib.so":
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        out.append((info, data))
    return out


def _replace(name_end: str, make):
    def change(members):
        key = _last_entry(members)
        return [make(info.name) if info.name == f"entries/{key}/{name_end}" else (info, data) for info, data in members]
    return change


def _version(members):
    manifest = json.loads(members[0][1])
    manifest["version"] = 99
    return [_file("manifest.json", json.dumps(manifest).encode())] + members[1:]


def _oversized(members):
    key = _last_entry(members)
    return [_file(info.name, data + b"\0" * 4096) if info.name == f"entries/{key}/src/host.c" else (info, data)
            for info, data in members]


HOSTILE = {
    "flipped byte in a library": _flip,
    "member ../x": lambda m: m + [_file("../x", b"outside")],
    "member entries/../../x": lambda m: m + [_file("entries/../../x", b"outside")],
    "absolute path": lambda m: m + [_file("/tmp/jitflow-bundle-test-absolute", b"outside")],
    "symbolic link member": _replace("src/host.c", lambda n: _special(n, tarfile.SYMTYPE, "/etc/passwd")),
    "hard link member": _replace("src/host.c", lambda n: _special(n, tarfile.LNKTYPE, "manifest.json")),
    "FIFO member": _replace("src/host.c", lambda n: _special(n, tarfile.FIFOTYPE)),
    "duplicated entry with different bytes": lambda m: m + [(m[-4][0], bytes(len(m[-4][1])))],
    "extra file": lambda m: m + [_file(f"entries/{_last_entry(m)}/src/extra.c", b"int x;")],
    "missing file": lambda m: [x for x in m if x[0].name != f"entries/{_last_entry(m)}/src/host.c"],
    "member larger than the manifest says": _oversized,
    "unknown format version": _version,
}


@pytest.mark.parametrize("case", list(HOSTILE) + ["truncated tar", "not a tar"])
def test_unpack_refuses_a_hostile_bundle_whole(case, bundle, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    bad = work / "bad.tar"
    if case == "truncated tar":
        data = bundle.read_bytes()
        bad.write_bytes(data[:len(data) * 3 // 4])
    elif case == "not a tar":
        bad.write_bytes(b"\x1f\x8b" + bundle.read_bytes()[:5000])
    else:
        _write(bad, HOSTILE[case](_read(bundle)))
    assert _members(bad) if case not in ("truncated tar", "not a tar") else True
    cache = work / "cache"
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(work))
    proc = jf("cache", "unpack", str(bad), "--cache-dir", str(cache))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert no_traceback(proc) and proc.stderr.startswith("jitflow: error: refusing the bundle"), proc.stderr
    assert "nothing was installed" in proc.stderr
    assert _installed(cache) == []
    assert list((cache / "v1" / "staging").iterdir()) == []
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(work))) == (before[0], before[1] + ["cache"])
    assert not Path("/tmp/jitflow-bundle-test-absolute").exists()


def test_unpack_keeps_the_counters_and_the_size_cap(built, tmp_path):
    """An entry unused for long is evicted when the entries unpacked pass the cap; those just
    installed are kept (published within the grace period), and the entries' size is recorded."""
    env, _, keys = built
    old, new = tmp_path / "old.tar", tmp_path / "new.tar"
    assert jf("cache", "pack", str(old), "--key", keys[1], env=env).returncode == 0
    assert jf("cache", "pack", str(new), "--key", keys[0], "--key", keys[2], env=env).returncode == 0
    dest = tmp_path / "cache"
    assert jf("cache", "unpack", str(old), "--cache-dir", str(dest)).returncode == 0
    folder = dest / "v1" / "entries" / keys[1][:2] / keys[1]
    for path in (folder / "last_used", folder):
        os.utime(path, (1e9, 1e9))
    cap = sum(e["size"] for e in json.loads(jf("cache", "pack", str(tmp_path / "x.tar"), "--key", keys[0],
                                                "--key", keys[2], "--json", env=env).stdout)["entries"]) + 4096
    proc = jf("cache", "unpack", str(new), "--cache-dir", str(dest), env={"JITFLOW_CACHE_MAX_SIZE": str(cap)})
    assert proc.returncode == 0, proc.stderr
    assert _installed(dest) == sorted([keys[0], keys[2]])
    stats = json.loads((dest / "v1" / "stats.json").read_text())
    assert 0 < stats["entries_bytes"] <= cap


def test_two_processes_unpacking_at_once_install_each_entry_once(bundle, built, tmp_path):
    _, _, keys = built
    dest = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    command = [sys.executable, "-m", "jitflow", "cache", "unpack", str(bundle), "--cache-dir", str(dest), "--json"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = [json.loads(out) for out, _ in outs]
    installed = [k for r in results for k in r["installed"]]
    assert sorted(installed) == sorted(keys)           # each entry installed by one process
    assert all(sorted(r["installed"] + r["skipped"]) == sorted(keys) for r in results)
    assert _installed(dest) == sorted(keys) and list((dest / "v1" / "staging").iterdir()) == []


# ---- modes: the folders unpack makes, --readable, and a later unpack that narrows nothing ----------

def _modes(top: Path) -> dict[str, int]:
    """Every path under `top` (itself included) with its permission bits."""
    found = {".": stat.S_IMODE(top.stat().st_mode)}
    for path in top.rglob("*"):
        found[str(path.relative_to(top))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _with_umask(mask: int, *args: str) -> subprocess.CompletedProcess:
    old = os.umask(mask)
    try:
        return jf(*args)
    finally:
        os.umask(old)


def test_unpack_makes_missing_parents_as_mkdir_does_and_its_own_folders_private(bundle, tmp_path):
    dest = tmp_path / "opt" / "app" / "cache"
    assert _with_umask(0o022, "cache", "unpack", str(bundle), "--cache-dir", str(dest)).returncode == 0
    assert [_modes(tmp_path)[p] for p in ("opt", "opt/app", "opt/app/cache")] == [0o755] * 3
    inside = {path: mode for path, mode in _modes(dest / "v1").items() if path != "stats.json"}
    assert inside and all(mode & 0o077 == 0 for mode in inside.values()), inside


def test_unpack_readable_lets_every_user_read_and_none_write(bundle, built, tmp_path):
    _, _, keys = built
    dest = tmp_path / "cache"
    proc = _with_umask(0o077, "cache", "unpack", str(bundle), "--cache-dir", str(dest), "--readable")
    assert proc.returncode == 0, proc.stderr
    entries = _modes(dest / "v1" / "entries")
    assert len([p for p in entries if p.endswith("lib.so")]) == len(keys)
    for path, mode in {**entries, "v1": _modes(dest / "v1")["."], "cache": _modes(dest)["."]}.items():
        is_dir = path in ("v1", "cache", ".") or (dest / "v1" / "entries" / path).is_dir()
        assert mode & 0o055 == (0o055 if is_dir else 0o044) and mode & 0o022 == 0, (path, oct(mode))


def test_a_later_unpack_narrows_nothing(bundle, built, tmp_path):
    env, _, keys = built
    first, second = tmp_path / "first.tar", tmp_path / "second.tar"
    assert jf("cache", "pack", str(first), "--key", keys[0], env=env).returncode == 0
    assert jf("cache", "pack", str(second), "--key", keys[1], env=env).returncode == 0
    dest = tmp_path / "cache"
    assert jf("cache", "unpack", str(first), "--cache-dir", str(dest)).returncode == 0
    subprocess.run(["chmod", "-R", "go+rX", str(dest)], check=True)        # opened to all by hand
    before = _modes(dest)
    for again in (first, second, bundle):                 # the same bundle again, another, then all of them
        proc = jf("cache", "unpack", str(again), "--cache-dir", str(dest))
        assert proc.returncode == 0, proc.stderr
    after = _modes(dest)
    assert {path: after[path] for path in before} == before
    assert after[f"v1/entries/{keys[1][:2]}/{keys[1]}"] == 0o700     # what it installs unasked stays private


def test_pack_takes_a_unique_key_prefix_and_refuses_others(built, tmp_path):
    env, _, keys = built
    out = tmp_path / "out.tar"
    proc = jf("cache", "pack", str(out), "--key", keys[1][:6].upper(), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert [e["key"] for e in json.loads(proc.stdout)["entries"]] == [keys[1]]
    unknown = next(p for p in ("000000", "ffffff", "123456") if not any(k.startswith(p) for k in keys))
    proc = jf("cache", "pack", str(out), "--key", unknown, env=env)
    assert proc.returncode == 2 and no_traceback(proc) and f"starts with {unknown}" in proc.stderr
    proc = jf("cache", "pack", str(out), "--key", keys[1][:5], env=env)
    assert proc.returncode == 2 and "6 to 64 hexadecimal digits" in proc.stderr


def test_pack_refuses_an_ambiguous_key_prefix(built, tmp_path):
    _, cache, keys = built
    copy = copy_cache(cache, tmp_path / "cache")
    twin = keys[0][:10] + ("0" if keys[0][10] != "0" else "1") + keys[0][11:]    # shares 10 digits with keys[0]
    shutil.copytree(entry_folder(copy, keys[0]), entry_folder(copy, twin))
    proc = jf("cache", "pack", str(tmp_path / "out.tar"), "--key", keys[0][:8], "--cache-dir", str(copy))
    assert proc.returncode == 2 and no_traceback(proc) and "ambiguous" in proc.stderr
    assert keys[0][:16] in proc.stderr and twin[:16] in proc.stderr
