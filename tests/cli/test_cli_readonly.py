"""`jitflow build --record FILE` and `--cache readonly`: the command line's record and read-only cache."""
from __future__ import annotations

import json

from cli_run import jf, no_traceback

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
