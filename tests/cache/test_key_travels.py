"""Keys travel between machines of one lock file: what differs between two such machines without
deciding a library's bytes is not in the key. The same builds get the same keys under two minor
versions of Python; the gcc nvcc preprocesses with is named by its version, not its folder.

The other Python's environment (other_python.py) is made once per machine, under the user's cache: a
minute or two the first time, so the test is marked `pythons` and run by `make test-pythons`, not
`make test`. Where there is no other Python, or its packages cannot be installed, it is skipped
saying why."""
from __future__ import annotations

import json
import os
import subprocess

import other_python
import pytest
from conftest import ROOT, TESTS, run_python

from jitflow.cache.key import key_diff

PROBE = TESTS / "key_probe.py"


@pytest.mark.pythons
def test_the_same_builds_get_the_same_keys_under_another_python_version(cache_dir):
    other = other_python.environment()
    here = json.loads(run_python(PROBE.read_text()).stdout)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([str(other.python), str(PROBE)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"Python {other.version} could not take the keys:\n{proc.stderr[-3000:]}"
    there = json.loads(proc.stdout)
    assert here["python"].rsplit(".", 1)[0] != there["python"].rsplit(".", 1)[0], (here["python"], there["python"])
    assert list(here["keys"]) == list(there["keys"])
    differ = {name: key_diff.lines(mine["inputs"], there["keys"][name]["inputs"], f"under Python {there['python']}")
              for name, mine in here["keys"].items() if mine["key"] != there["keys"][name]["key"]}
    assert differ == {}, f"keys under Python {here['python']} and {there['python']} differ"
    assert all(k["uncacheable"] is None for k in here["keys"].values())
    # every registered callable was named by its source text or TVM's name, the same text on both sides
    assert "tvm.s_tir.pipeline.default_s_tir_pipeline" in json.dumps(there["keys"]["cpu kernel"]["inputs"])


def test_nvccs_host_compiler_is_keyed_by_its_version_not_its_path(tmp_path, monkeypatch):
    """Two machines with the same gcc in other folders (/usr/bin, /usr/local/bin) share nvcc's keys."""
    from jitflow.toolchain.cuda import nvcc

    seen = []
    for folder in ("usr-bin", "usr-local-bin"):
        gcc = tmp_path / folder / "gcc"
        gcc.parent.mkdir()
        gcc.write_text("#!/bin/sh\necho 13.2.0\n")
        gcc.chmod(0o755)
        monkeypatch.setenv("PATH", str(gcc.parent))
        seen.append(nvcc._host_compiler())
    assert seen == ["gcc 13.2.0", "gcc 13.2.0"]
