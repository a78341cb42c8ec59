"""The cache's counters (`jitflow cache stats`): exact under processes racing, kept across
processes, zeroed on request; and the name an entry is listed under (`cache ls`)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import kernels
import pytest
from conftest import ROOT, TESTS, run_python, start_python

import jitflow
from jitflow.cache.store import counters

def jf(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "jitflow", *args], capture_output=True, text=True, env=env,
                          timeout=300)


RACER = """
    import sys, time
    from pathlib import Path
    from jitflow.cache.store import counters
    root, go = Path(sys.argv[1] if len(sys.argv) > 1 else {root!r}), Path({go!r})
    while not go.exists():
        time.sleep(0.001)
    for _ in range({n}):
        counters.add(root, hits=1, saved_seconds=0.5)
"""


def test_racing_processes_lose_no_count(tmp_path):
    go = tmp_path / "go"
    procs = [start_python(textwrap.dedent(RACER.format(root=str(tmp_path), go=str(go), n=150))) for _ in range(4)]
    go.touch()                                      # all start adding at once
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    totals = counters.read(tmp_path)
    assert totals["hits"] == 600 and totals["saved_seconds"] == 300.0 and totals["misses"] == 0
    assert (tmp_path / counters.FILE).stat().st_size == counters.RECORD                   # it never grows
    counters.zero(tmp_path)
    assert counters.read(tmp_path)["hits"] == 0 and counters.read(tmp_path)["since"] > 0


BUILDER = """
    import jitflow, kernels
    for scale in ({mine}, 950.0):                # one of its own, one every process races for
        exe = jitflow.compile(kernels.axpb(scale), "c")
        for _ in range(3):
            exe.build()
    print("ok")
"""


@pytest.mark.slow
def test_cache_stats_counts_builds_and_hits_of_racing_processes(cache_dir):
    procs = [start_python(textwrap.dedent(BUILDER.format(mine=940.0 + i))) for i in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.split() == ["ok"], err
    d = json.loads(jf("cache", "stats", "--json").stdout)
    assert d["schema"] == "jitflow.cache-stats/1"
    # 4 keys built once each; every other of the 18 lookups a hit (the racers for 950 load its build)
    assert (d["builds"], d["misses"], d["shared_hits"], d["hits"]) == (4, 4, 0, 14), d
    assert d["build_seconds"] > 0 and d["saved_seconds"] > 0 and abs(d["hit_rate"] - 14 / 18) < 1e-9
    text = jf("cache", "stats").stdout
    assert "hits:" in text and "14 (77.8 % of lookups)" in text and "builds:" in text
    assert jf("cache", "stats", "--zero", "--json").returncode == 0
    assert json.loads(jf("cache", "stats", "--json").stdout)["hits"] == 0


def test_cache_ls_names_an_entry_by_its_name_else_its_functions(cache_dir, tmp_path):
    named = jitflow.compile(kernels.axpb(960.0), "c", name="tile 8x16")
    plain = jitflow.compile(kernels.axpb(961.0), "c")
    assert named.key == jitflow.compile(kernels.axpb(960.0), "c").key          # a label, not part of the key
    named.build(), plain.build()
    module = tmp_path / "mods.py"
    module.write_text("import kernels\nk = kernels.axpb(962.0)\n")
    out = tmp_path / "k.so"
    assert jf("build", f"{module}:k", "--target", "c", "-o", str(out)).returncode == 0
    rows = {e["key"]: e for e in json.loads(jf("cache", "ls", "--json").stdout)["entries"]}
    assert rows[named.key]["name"] == "tile 8x16" and rows[plain.key]["name"] is None
    assert [e["name"] for k, e in rows.items() if k not in (named.key, plain.key)] == [f"{module}:k"]
    text = jf("cache", "ls").stdout
    assert "tile 8x16" in text and f"{module}:k" in text
    assert any(line.split()[1] == "main" for line in text.splitlines()[1:])          # the unnamed one


# --- a damaged counter file never fails a build, never blocks, never writes through --------------

HIT = """
    import jitflow, kernels
    exe = jitflow.compile(kernels.axpb(970.0), "c")
    exe.jit()
    print(exe.build_info.outcome)
"""


def _hit() -> subprocess.CompletedProcess:
    proc = run_python(HIT, timeout=120)
    assert proc.stdout.split() == ["hit"], proc.stderr
    return proc


@pytest.fixture
def stats_file(cache_dir):
    """A cache holding one entry (so that the next lookup is a hit), and where its counters live."""
    jitflow.compile(kernels.axpb(970.0), "c").build()
    return cache_dir / "v1" / counters.FILE


def _stats(timeout: float = 120) -> tuple[dict, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-m", "jitflow", "cache", "stats", "--json"], capture_output=True,
                          text=True, env=env, timeout=timeout)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("number", ["1e400", "Infinity"])
def test_a_counter_that_is_not_a_finite_count_reads_as_zeros_and_a_hit_still_counts(stats_file, number, caplog):
    stats_file.write_text(f'{{"hits": {number}, "misses": 1}}'.ljust(counters.RECORD))
    d, err = _stats()
    assert (d["hits"], d["misses"], d["builds"]) == (0, 0, 0)
    assert f"counter file {stats_file} is damaged (hits is" in err and "reads as zeros" in err
    hit = _hit()                                         # no OverflowError: the hit is served and counted
    assert "is damaged" in hit.stderr and "Traceback" not in hit.stderr
    assert counters.read(stats_file.parent)["hits"] == 1 and stats_file.stat().st_size == counters.RECORD
    for other in ("-5", "NaN", "12345678901234567890123", '"many"', "[1]", "true"):   # each read as damage
        stats_file.write_text(f'{{"builds": {other}}}'.ljust(counters.RECORD))
        assert counters.read(stats_file.parent)["builds"] == 0
        counters.add(stats_file.parent, builds=1)
        assert counters.read(stats_file.parent)["builds"] == 1, other       # and the next count replaces it


def test_a_counter_file_that_is_a_folder_reads_as_zeros_and_is_left_alone(stats_file):
    stats_file.unlink()
    stats_file.mkdir()
    (stats_file / "kept").write_text("mine")
    d, err = _stats()
    assert d["hits"] == 0 and f"counter file {stats_file} is not a regular file (a folder)" in err
    assert "Traceback" not in _hit().stderr
    assert (stats_file / "kept").read_text() == "mine"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    zero = subprocess.run([sys.executable, "-m", "jitflow", "cache", "stats", "--zero"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert zero.returncode == 3 and "it is a folder: remove it" in zero.stderr and "Traceback" not in zero.stderr


def test_a_counter_file_that_is_a_fifo_never_blocks(stats_file):
    stats_file.unlink()
    os.mkfifo(stats_file)
    d, err = _stats(timeout=60)                          # it used to wait for a writer for ever
    assert d["hits"] == 0 and "is not a regular file (a FIFO (named pipe))" in err
    assert "Traceback" not in _hit().stderr
    assert stat.S_ISFIFO(os.lstat(stats_file).st_mode)


def test_a_counter_file_that_is_a_link_is_never_written_through(stats_file, tmp_path):
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's own notes\n" * 40)
    before = victim.read_bytes()
    stats_file.unlink()
    stats_file.symlink_to(victim)
    d, err = _stats()
    assert d["hits"] == 0 and "is not a regular file (a symbolic link)" in err
    _hit()
    assert victim.read_bytes() == before                 # every hit used to rewrite its first 512 bytes
    os.link(victim, tmp_path / "second-name")
    stats_file.unlink()
    os.link(victim, stats_file)                          # a hard link: the same file under two names
    counters.record(stats_file.parent, "hit", 0.001, {})
    assert victim.read_bytes() == before
    counters.zero(stats_file.parent)                     # --zero puts a fresh record in its place
    assert victim.read_bytes() == before and not stats_file.is_symlink() and stats_file.stat().st_nlink == 1
    assert counters.read(stats_file.parent)["hits"] == 0 and counters.read(stats_file.parent)["since"] > 0
