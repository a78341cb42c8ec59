"""The command line against a temporary cache: output and effects of each command."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import jitflow

import kernels
from conftest import ROOT, TESTS


def jf(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), **(env or {}))
    return subprocess.run([sys.executable, "-m", "jitflow", *args], capture_output=True, text=True, env=full,
                          input=stdin, timeout=300)


def _fill(count: int) -> list[jitflow.Executable]:
    exes = [jitflow.compile(kernels.axpb(100.0 + i), "c") for i in range(count)]
    for exe in exes:
        exe.jit()
    return exes


def test_help_lists_every_command():
    out = jf("--help").stdout
    for command in ("build", "cache", "doctor", "warm"):
        assert command in out


def test_cache_ls_and_info(cache_dir):
    exes = _fill(2)
    listing = jf("cache", "ls").stdout.splitlines()
    assert listing[0].split()[:3] == ["key", "functions", "target"]
    assert sorted(line.split()[0] for line in listing[1:]) == sorted(e.key[:12] for e in exes)
    assert all(" main " in line and " c " in line for line in listing[1:])
    info = jf("cache", "info").stdout
    assert f"location:  {cache_dir / 'v1'}" in info and "entries:   2" in info and "cap:" in info


def test_cache_prune_older_than_and_max_size(cache_dir):
    old, mid, new = _fill(3)
    now = time.time()
    for exe, age in ((old, 40 * 86400), (mid, 5 * 86400), (new, 0)):
        entry = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key
        os.utime(entry / "last_used", (now - age, now - age))
        os.utime(entry, (now - age, now - age))  # published long ago: past the grace period
    out = jf("cache", "prune", "--older-than", "30d").stdout
    assert "removed 1 entries" in out
    remaining = {line.split()[0] for line in jf("cache", "ls").stdout.splitlines()[1:]}
    assert remaining == {mid.key[:12], new.key[:12]}
    # a cap smaller than one entry removes the least recently used one first; the newest is in its grace period
    assert "removed 1 entries" in jf("cache", "prune", "--max-size", "1KB").stdout
    assert {line.split()[0] for line in jf("cache", "ls").stdout.splitlines()[1:]} == {new.key[:12]}


def test_cache_clear_asks_unless_yes(cache_dir):
    _fill(2)
    refused = jf("cache", "clear")  # no terminal, no --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "entries:   2" in jf("cache", "info").stdout
    assert "removed 2 entries" in jf("cache", "clear", "--yes").stdout
    assert "entries:   0" in jf("cache", "info").stdout


def test_doctor_passes_here_and_fails_without_the_tvm_compiler(cache_dir):
    ok = jf("doctor", "--cpu")
    assert ok.returncode == 0, ok.stdout
    assert "[ok] zig" in ok.stdout and "[ok] cache directory" in ok.stdout
    broken = jf("doctor", "--cpu", env={"TVM_USE_RUNTIME_LIB": "1"})
    assert broken.returncode == 1
    assert "[!!] TVM compiler" in broken.stdout and "fix:" in broken.stdout


def test_doctor_reports_an_unwritable_cache(tmp_path, zig_cache):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = jf("doctor", "--cpu", env={"JITFLOW_CACHE_DIR": str(blocker / "cache"),
                                     "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
    assert out.returncode == 1 and "[!!] cache directory" in out.stdout and "JITFLOW_CACHE_DIR" in out.stdout


def test_warm_then_build_from_the_shell(cache_dir, tmp_path):
    warm = jf("warm")
    assert warm.returncode == 0 and "warmed zig for x86_64-linux-gnu" in warm.stdout
    model = tmp_path / "model.py"
    model.write_text("import kernels\nModule = kernels.axpb(3.5)\n")
    out = tmp_path / "model.so"
    built = jf("build", f"{model}:Module", "--target", "c", "-o", str(out))
    assert built.returncode == 0, built.stderr
    assert out.is_file() and "built" in built.stdout
    missing = jf("build", f"{model}:Nope", "--target", "c", "-o", str(out))
    assert missing.returncode == 1 and "has no 'Nope'" in missing.stderr
