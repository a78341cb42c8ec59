"""Deploying without a compiler, end to end with real processes and files: a workload recorded where
building is allowed (JITFLOW_RECORD), packed by its record (`jitflow cache pack --manifest`),
unpacked into an empty cache at another path (`jitflow cache unpack`), then served by a fresh
process with JITFLOW_CACHE=readonly: every module a hit with the right numbers, nothing written
under the cache folder or zig's, and a module the workload did not use a CacheMissError."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, TESTS, run_python
from test_readonly import listing

import jitflow.cache

pytestmark = pytest.mark.skipif(not hasattr(jitflow.cache, "pack"), reason="this jitflow has no cache bundles")

#: the workload: two kernels and a small Relax model, each used and checked against numpy; prints
#: the keys obtained and how; with argv "miss", also a kernel the others never used
WORKLOAD = """
    import json, sys
    import numpy as np, tvm, jitflow, kernels, models
    from jitflow.errors import CacheMissError
    a = tvm.runtime.tensor(np.arange(64, dtype="float32"))
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    got = {{}}
    exe = jitflow.compile(kernels.axpb(21.0), "c")
    exe["main"](a, c)
    np.testing.assert_allclose(c.numpy(), np.arange(64) * 21.0 + 1)
    got[exe.key] = exe.build_info.outcome
    exe = jitflow.compile(kernels.vecadd(64), "c", name="vecadd")
    exe["main"](a, a, c)
    np.testing.assert_allclose(c.numpy(), 2 * np.arange(64))
    got[exe.key] = exe.build_info.outcome
    exe = jitflow.compile(models.mlp(), "c")
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    y = exe.vm("cpu")["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights()), rtol=1e-5, atol=1e-5)
    got[exe.key] = exe.build_info.outcome
    missed = None
    if {miss!r}:
        other = jitflow.compile(kernels.axpb(22.0), "c")
        try:
            other.jit()
        except CacheMissError as exc:
            missed = [other.key, str(exc)]
    print(json.dumps({{"got": got, "missed": missed}}))
"""


def jf(*args: str) -> subprocess.CompletedProcess:
    """The `jitflow` command in a subprocess."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "jitflow", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_record_pack_unpack_and_serve_read_only(tmp_path, zig_cache):
    built, served, record, bundle = tmp_path / "ci-cache", tmp_path / "image" / "cache", tmp_path / "rec.jsonl", \
        tmp_path / "bundle.tar"
    ci = {"JITFLOW_CACHE_DIR": str(built), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), "JITFLOW_CACHE": "1",
          "JITFLOW_RECORD": str(record)}
    # CI: run the workload, recording what it obtained
    first = json.loads(run_python(WORKLOAD.format(miss=False), env=ci).stdout.splitlines()[-1])["got"]
    assert len(first) == 3 and set(first.values()) == {"built"}
    recorded = [json.loads(line)["key"] for line in record.read_text().splitlines()]
    assert sorted(recorded) == sorted(first)
    proc = jf("cache", "pack", str(bundle), "--manifest", str(record), "--cache-dir", str(built), "--json")
    assert proc.returncode == 0, proc.stderr
    assert sorted(e["key"] for e in json.loads(proc.stdout)["entries"]) == sorted(first)

    # the image: an empty cache at another path
    proc = jf("cache", "unpack", str(bundle), "--cache-dir", str(served), "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(json.loads(proc.stdout)["installed"]) == sorted(first)

    # serving: read-only, in a fresh process; nothing may change under the cache folder or zig's
    before = listing(served)
    zig = tmp_path / "zig-never"
    serve = {"JITFLOW_CACHE_DIR": str(served), "JITFLOW_CACHE": "readonly", "JITFLOW_ZIG_CACHE_DIR": str(zig),
             "JITFLOW_RECORD": ""}
    out = json.loads(run_python(WORKLOAD.format(miss=True), env=serve).stdout.splitlines()[-1])
    assert out["got"] == dict.fromkeys(first, "hit")
    key, message = out["missed"]
    assert key in message and "jitflow cache pack" in message and "JITFLOW_RECORD" in message
    assert listing(served) == before and not zig.exists()


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_bundle_rolled_out(tmp_path, zig_cache):
    """benchmarks/deploy_gpu.py end to end on a GPU: `prepare` builds a CUDA model, a kernel and a module of
    two kernels (NVRTC, sm_90) and packs them; `rollout` checks the bundle, unpacks it as root into a folder
    whose parents do not exist, and a fresh JITFLOW_CACHE=readonly process of another user hits all three
    and checks their numbers against numpy, then loads them by label in a TVM without its compiler; last,
    they are built cold (about a minute in all)."""
    script = [sys.executable, str(ROOT / "benchmarks" / "deploy_gpu.py")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               JITFLOW_ZIG_CACHE_DIR=str(zig_cache))
    prep = subprocess.run([*script, "prepare", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert prep.returncode == 0, prep.stdout + prep.stderr
    assert "packed 3 entries" in prep.stdout
    proc = subprocess.run([*script, "rollout", str(tmp_path / "deploy.tar")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0 and "rollout: every step passed" in proc.stdout, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for name in ("mlp", "vecadd", "pair"):
        assert any(", read-only" in ln and f" {name} " in ln and ln.endswith("(hit)") for ln in lines), proc.stdout
        assert any(", by label" in ln and f" {name} " in ln and ln.endswith("(loaded by label)") for ln in lines), \
            proc.stdout
        assert any(ln.startswith("root, cold build") and f" {name} " in ln and ln.endswith("(built)")
                   for ln in lines), proc.stdout
