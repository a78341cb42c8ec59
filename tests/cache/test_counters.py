"""The cache's counters (`jitflow cache stats`): exact under processes racing, kept across
processes, zeroed on request; and the name an entry is listed under (`cache ls`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import kernels
from conftest import ROOT, TESTS, start_python

import jitflow
from jitflow.cache import counters

def jf(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "jitflow", *args], capture_output=True, text=True, env=env,
                          timeout=300)


RACER = """
    import sys, time
    from pathlib import Path
    from jitflow.cache import counters
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
