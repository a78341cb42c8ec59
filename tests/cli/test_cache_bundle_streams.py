"""Bundles as `jitflow cache pack` never writes them, and bundles through a pipe: malformed GNU sparse
headers and a huge extended header ahead of the manifest are refused (status 2, nothing installed,
the header never read whole), entries whose recorded key inputs are not their key's are refused, a
bundle given on standard input is read as a stream, and the staging folder of an unpack killed
midway is removed by the next prune or unpack, never while its unpack lives.

Two CPU kernels are built once for the module; every test packs or unpacks into folders of its own.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from cli_run import build_entries, cache_env, jf, no_traceback
from conftest import ROOT, TESTS, run_python

BUILD = """
    import jitflow, kernels
    for scale in (1111.0, 1112.0):
        exe = jitflow.compile(kernels.axpb(scale), "c")
        exe.build()
        print(exe.key)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, keys, bundle of both entries) of a cache built once for these tests."""
    cache = tmp_path_factory.mktemp("streams") / "cache"
    env = cache_env(cache, zig_cache)
    keys = build_entries(env, BUILD)
    bundle = cache.parent / "both.tar"
    assert jf("cache", "pack", str(bundle), env=env).returncode == 0
    return env, keys, bundle


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]


def _write(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))


def _installed(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "v1" / "entries").glob("*/*"))


def _refused(proc: subprocess.CompletedProcess, says: str = "") -> bool:
    return (proc.returncode == 2 and no_traceback(proc) and proc.stderr.startswith("jitflow: error: refusing the bundle")
            and "nothing was installed" in proc.stderr and says in proc.stderr)


# ---- GNU sparse headers tarfile cannot parse ----

#: the pax records of a member, and what its data starts with (a sparse 1.0 member's map)
SPARSE = {
    "0.1 map with a word": ({"GNU.sparse.map": "1,x"}, b""),
    "0.1 map that is empty": ({"GNU.sparse.map": ""}, b""),
    "0.0 size that is no number": ({"GNU.sparse.size": "abc"}, b""),
    "1.0 realsize that is no number": ({"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                                        "GNU.sparse.realsize": "x"}, b"1\n0\n1\n"),
    "1.0 map count that is no number": ({"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}, b"x\n0\n1\n"),
    "1.0 map without a line end": ({"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}, b"1" * 600),
}


@pytest.mark.parametrize("where", ["the manifest", "an entry's file"])
@pytest.mark.parametrize("case", list(SPARSE))
def test_a_malformed_gnu_sparse_header_is_refused_whole(case, where, built, tmp_path):
    _, _, bundle = built
    members = _members(bundle)
    index = 0 if where == "the manifest" else len(members) - 1
    records, head = SPARSE[case]
    info, data = members[index]
    info.pax_headers = dict(records)
    members[index] = (info, head + data[len(head):] if len(data) >= len(head) else head)
    members[index][0].size = len(members[index][1])
    bad = tmp_path / "sparse.tar"
    _write(bad, members)
    cache = tmp_path / "cache"
    proc = jf("cache", "unpack", str(bad), "--cache-dir", str(cache))
    assert _refused(proc), (proc.returncode, proc.stderr)
    assert _installed(cache) == [] and list((cache / "v1" / "staging").iterdir()) == []


# ---- a huge extended header ahead of the manifest ----

HUGE = 128 << 20

MEASURE = """
    import json, resource, jitflow.cache
    from jitflow.errors import BundleError
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        jitflow.cache.unpack({path!r}, cache_dir={cache!r})
        said = "installed"
    except BundleError as exc:
        said = str(exc)
    print(json.dumps([said, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before]))
"""


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME], ids=["pax header", "GNU long name"])
def test_a_huge_extended_header_ahead_of_the_manifest_is_refused_unread(kind, built, tmp_path):
    _, _, bundle = built
    header = tarfile.TarInfo("././@LongLink" if kind == tarfile.GNUTYPE_LONGNAME else "././@PaxHeader")
    header.type, header.size = kind, HUGE + 100
    bad = tmp_path / "huge.tar"
    with open(bad, "wb") as f:           # the header, a hole the size it announces (no disk used), the bundle
        f.write(header.tobuf(format=tarfile.GNU_FORMAT))
        f.seek(-(-header.size // 512) * 512, os.SEEK_CUR)
        f.write(bundle.read_bytes())
    cache = tmp_path / "cache"
    said, grown_kib = json.loads(run_python(MEASURE.format(path=str(bad), cache=str(cache))).stdout.splitlines()[-1])
    assert said.startswith("refusing the bundle") and f"announces {HUGE + 100} bytes" in said, said
    assert grown_kib < 16 << 10, f"unpack grew by {grown_kib} KiB: the header was read"
    assert _installed(cache) == []


# ---- entries whose recorded key inputs are not their key's ----

def test_an_entry_whose_key_inputs_are_not_its_keys_is_refused(built, tmp_path):
    _, keys, bundle = built
    members = _members(bundle)
    manifest = json.loads(members[0][1])
    key = manifest["entries"][-1]["key"]
    for n, (info, data) in enumerate(members):
        if info.name == f"entries/{key}/meta.json":
            meta = json.loads(data)
            meta["key_inputs"]["versions"]["tvm"] = "0.0"      # consistent in every other way
            data = json.dumps(meta).encode()
            info.size = len(data)
            members[n] = (info, data)
            for line in manifest["entries"][-1]["files"]:
                if line["path"] == "meta.json":
                    line["size"], line["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    head = json.dumps(manifest).encode()
    members[0][0].size = len(head)
    members[0] = (members[0][0], head)
    bad = tmp_path / "inputs.tar"
    _write(bad, members)
    cache = tmp_path / "cache"
    proc = jf("cache", "unpack", str(bad), "--cache-dir", str(cache))
    assert _refused(proc, f"entry {key[:12]}: metadata records other key inputs than its key"), proc.stderr
    assert _installed(cache) == []


# ---- a bundle through a pipe, and an unpack killed midway ----

def _unpack_command(cache: Path) -> list[str]:
    return [sys.executable, "-m", "jitflow", "cache", "unpack", "/dev/stdin", "--cache-dir", str(cache), "--json"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))


def test_a_bundle_on_standard_input_is_read_as_a_stream(built, tmp_path):
    _, keys, bundle = built
    cache = tmp_path / "cache"
    proc = subprocess.run(["bash", "-c", f"cat {bundle} | {' '.join(_unpack_command(cache))}"], env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)["installed"]) == sorted(keys) == _installed(cache)
    assert list((cache / "v1" / "staging").iterdir()) == []


def _killed_midway(bundle: Path, cache: Path) -> tuple[subprocess.Popen, Path]:
    """An unpack reading `bundle` from a pipe that stops halfway, its staging folder holding a file."""
    data = bundle.read_bytes()
    proc = subprocess.Popen(_unpack_command(cache), env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(data[:len(data) * 3 // 4])
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [p for p in (cache / "v1" / "staging").glob("*") if any(p.rglob("lib.so"))] \
            if (cache / "v1" / "staging").is_dir() else []
        if found:
            return proc, found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the unpack never staged a file")


@pytest.mark.parametrize("then", ["prune", "unpack"])
def test_a_killed_unpacks_staging_is_removed_by_the_next_prune_or_unpack_never_while_it_lives(then, built, tmp_path):
    _, keys, bundle = built
    cache = tmp_path / "cache"
    proc, staged = _killed_midway(bundle, cache)
    try:
        for command in (["prune"], ["clear", "--yes"], ["unpack", str(bundle)]):    # while it lives: kept
            assert jf("cache", *command, "--cache-dir", str(cache)).returncode == 0
            assert staged.is_dir() and any(staged.rglob("lib.so")), command
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and staged.is_dir()
    again = jf("cache", then, *([str(bundle)] if then == "unpack" else []), "--cache-dir", str(cache))
    assert again.returncode == 0, again.stderr
    assert list((cache / "v1" / "staging").iterdir()) == []
    assert _installed(cache) == sorted(keys)
