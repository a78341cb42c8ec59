"""build_all on a Ray cluster (marker `ray`, run by `make test-ray`): a local cluster of 2 CPUs,
started here with its own worker cache folder, so that what the workers build must come back
into the caller's cache over the wire."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import instruments
import kernels
import models
import numpy as np
import pytest
import tvm
from conftest import ROOT, run_python, start_python
from redis_server import RedisServer, redis_missing, required_in_ci

import jitflow
from jitflow.farm import request

ray = pytest.importorskip("ray", reason="pip install 'jitflow[ray]' (make test-ray does)")
pytestmark = pytest.mark.ray

SECRET = "farm-test-signing-key"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zig_cache):
    """A local Ray cluster whose workers read their settings from the environment it started with:
    their own cache folder, the shared tier (when Redis is here), and the die-once folder that the
    workers' setup hook (tests/die_once.py) reads."""
    root = tmp_path_factory.mktemp("ray")
    redis = None
    if redis_missing() is None:
        redis = RedisServer().start()
    elif required_in_ci():
        pytest.fail(f"the farm's shared-tier test needs Redis in CI: {redis_missing()}")
    env = {"JITFLOW_CACHE_DIR": str(root / "workers"), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache),
           "DIE_ONCE_FOLDER": str(root / "die")}
    if redis is not None:   # a worker killed while it holds the tier's lock holds up the retry for the TTL
        env.update(JITFLOW_REMOTE_CACHE=redis.url, JITFLOW_REMOTE_CACHE_KEY=SECRET, JITFLOW_REMOTE_CACHE_LOCK_TTL="3")
    (root / "die").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])},
                              "worker_process_setup_hook": "die_once.arm"})
    try:
        yield {"root": root, "redis": redis, "address": ray.get_runtime_context().gcs_address}
    finally:
        ray.shutdown()
        if redis is not None:
            redis.close()


def _axpb(exe, scale: float) -> None:
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), scale + 1)


def test_a_sweep_builds_on_workers_and_the_caller_then_hits_all(cluster, cache_dir):
    scales = [800.0 + i for i in range(5)]
    good = [jitflow.compile(kernels.axpb(s), "c") for s in scales]
    bad = jitflow.compile(kernels.vecadd(), "cuda", arch="sm_90")          # loops not bound to threads
    twin = jitflow.compile(kernels.axpb(scales[0]), "c")
    results = jitflow.build_all(good[:2] + [bad] + good[2:] + [twin], backend="ray")
    assert [r.ok for r in results] == [True, True, False, True, True, True, True]
    assert results[2].error_type == "ScheduleError" and "not bound" in results[2].error
    assert all(r.where.startswith("ray ") for r in results)
    assert [r.outcome for r in results if r.ok] == ["built"] * 6
    workers = cluster["root"] / "workers" / "v1" / "entries"
    for scale, exe in zip(scales, good):
        ours = cache_dir / "v1" / "entries" / exe.key[:2] / exe.key / "lib.so"
        assert ours.read_bytes() == (workers / exe.key[:2] / exe.key / "lib.so").read_bytes()
        _axpb(exe, scale)
        assert exe.build_info.outcome == "hit"              # built by a worker, loaded from our cache
    again = jitflow.build_all([jitflow.compile(kernels.axpb(s), "c") for s in scales], backend="ray")
    assert [(r.outcome, r.where) for r in again] == [("hit", "here")] * len(scales)


def test_a_models_weights_go_to_the_object_store_once_per_sweep(cluster, cache_dir, monkeypatch):
    put = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: put.append(len(value)) or real_put(value, **kw))
    weights = models.mlp_weights(d_in=64, hidden=64)
    exes = [jitflow.compile(models.mlp(d_in=64, hidden=64), "c", pass_config={"relax.FuseOps.max_depth": depth})
            for depth in (2, 3)]
    results = jitflow.build_all(exes, backend="ray")
    assert [(r.ok, r.outcome, r.where[:4]) for r in results] == [(True, "built", "ray ")] * 2, results
    big = [w for w in weights.values() if w.nbytes * 4 / 3 > request.APART_CHARS]
    assert len(big) == 1 and len(put) == 1 and put[0] > big[0].nbytes     # w1, once for both candidates
    x = np.random.rand(4, 64).astype("float32")
    for exe in exes:
        out = exe.vm("cpu")["main"](tvm.runtime.tensor(x)).numpy()
        np.testing.assert_allclose(out, models.mlp_reference(x, weights), rtol=1e-4, atol=1e-5)
        assert exe.build_info.outcome == "hit"


def test_a_task_that_dies_is_retried_once_then_reported(cluster, cache_dir):
    once, twice = (jitflow.compile(kernels.axpb(s), "c") for s in (820.0, 821.0))
    die = cluster["root"] / "die"
    (die / once.key).touch()
    (die / twice.key).touch()
    (die / f"{twice.key}.2").touch()
    results = jitflow.build_all([once, twice], backend="ray")
    assert results[0].ok and results[0].outcome == "built"
    _axpb(once, 820.0)
    assert not results[1].ok and "retried once" in results[1].note
    assert "died" in results[1].error.lower() or "crash" in results[1].error_type.lower(), results[1]
    assert list(die.iterdir()) == []                   # each armed death happened exactly once


# a driver in another process: what it compiled, where each was built, and the key it got
DRIVER = """
    import json, os, numpy as np, ray, tvm, jitflow, kernels
    ray.init(address={address!r}, log_to_driver=False, runtime_env={runtime_env!r})
    {setup}
    exes = [jitflow.compile(kernels.{kernel}(s), "c") for s in {scales!r}]
    results = jitflow.build_all(exes, backend="ray")
    print(json.dumps([[e.key, r.ok, r.outcome, r.where, r.note] for e, r in zip(exes, results)]))
"""


def _driver(cluster, scales, setup="", kernel="axpb", workers_cache=None, cache=None):
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}}
    if workers_cache:     # this job's workers get their own cache folder (not a secret: it may travel)
        runtime_env["env_vars"]["JITFLOW_CACHE_DIR"] = str(workers_cache)
    code = DRIVER.format(address=cluster["address"], runtime_env=runtime_env, kernel=kernel, scales=scales,
                         setup=textwrap.indent(textwrap.dedent(setup), "    ").strip())
    return textwrap.dedent(code), {"JITFLOW_CACHE_DIR": str(cache)} if cache else {}


def test_a_worker_whose_key_differs_refuses_and_the_item_is_built_here(cluster, tmp_path):
    rule = """
        def exp2(op):
            return tvm.tirx.call_pure_extern("float32", "exp2f", op.args[0])
        tvm.tirx.op.register_intrin_lowering("tirx.exp", "c", f=exp2, level=99)
    """        # a Python registration in the caller only: the workers' key differs
    code, env = _driver(cluster, [64], setup=rule, kernel="libm_calls", cache=tmp_path / "caller")
    (key, ok, outcome, where, note), = json.loads(run_python(code, env=env, timeout=240).stdout.splitlines()[-1])
    assert ok and outcome == "built" and where == "here"
    assert note.startswith("built here: the worker's key") and "registrations" in note


def test_items_whose_inputs_cannot_travel_are_built_here_and_say_why(cluster, cache_dir):
    with instruments.context(instruments.Record()):
        watched = jitflow.compile(kernels.axpb(830.0), "c")
    results = jitflow.build_all([watched, jitflow.compile(kernels.axpb(831.0), "c")], backend="ray")
    assert results[0].ok and results[0].where == "here" and "instruments" in results[0].note
    assert results[1].ok and results[1].where.startswith("ray ") and results[1].note is None
    _axpb(watched, 830.0)


def test_two_drivers_on_one_cluster_with_a_shared_tier_build_each_key_once(cluster, tmp_path):
    if cluster["redis"] is None:
        pytest.skip(redis_missing())
    scales = [[840.0, 841.0, 842.0, 843.0], [840.0, 841.0, 842.0, 844.0]]     # three keys in common
    procs = []
    for n, mine in enumerate(scales):
        code, env = _driver(cluster, mine, workers_cache=tmp_path / f"workers{n}", cache=tmp_path / f"caller{n}")
        procs.append(start_python(code, env=env))
    outcomes: dict[str, list[str]] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        for key, ok, outcome, where, note in json.loads(out.splitlines()[-1]):
            assert ok and where.startswith("ray "), (outcome, where, note)
            outcomes.setdefault(key, []).append(outcome)
    assert len(outcomes) == 5
    assert all(found.count("built") == 1 for found in outcomes.values()), outcomes
    assert sorted(len(found) for found in outcomes.values()) == [1, 1, 2, 2, 2]


def test_the_meta_schedule_builder_builds_on_the_cluster_and_hands_out_local_copies(cluster, cache_dir):
    pytest.importorskip("psutil", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")
    import shutil

    from tvm.s_tir import meta_schedule as ms

    from jitflow.meta_schedule import Builder

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    inputs = [ms.builder.BuilderInput(kernels.axpb(4200.0 + i), target) for i in range(3)]
    results = Builder(backend="ray", timeout_s=120).build(inputs)
    assert [r.error_msg for r in results] == [None] * 3
    workers = cluster["root"] / "workers" / "v1" / "entries"
    for i, r in enumerate(results):
        exe = jitflow.compile(kernels.axpb(4200.0 + i), "c")
        assert (workers / exe.key[:2] / exe.key / "lib.so").is_file()          # built by a worker
        assert cache_dir not in Path(r.artifact_path).parents     # a copy, here
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        tvm.runtime.load_module(r.artifact_path)["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
        np.testing.assert_allclose(c.numpy(), 4201.0 + i)
        shutil.rmtree(os.path.dirname(r.artifact_path))
        assert exe.cached()


def test_a_cluster_without_a_cpu_is_an_error_not_a_wait(cluster, cache_dir, monkeypatch):
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"memory": 1e9})     # what ray.init(num_cpus=0) gives
    with pytest.raises(jitflow.errors.InvalidInputError, match="no CPU to run build tasks on"):
        jitflow.build_all([jitflow.compile(kernels.axpb(4300.0), "c")], backend="ray")


def test_the_caller_records_what_the_cluster_obtained_from_the_results(cluster, cache_dir, tmp_path):
    record, again = tmp_path / "record.jsonl", tmp_path / "again.jsonl"
    exes = [jitflow.compile(kernels.axpb(s), "c", record=record) for s in (932.0, 933.0)]
    results = jitflow.build_all(exes, backend="ray")
    assert [(r.ok, r.outcome, r.where[:4]) for r in results] == [(True, "built", "ray ")] * 2, results
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted((line["key"], line["outcome"]) for line in lines) == sorted((e.key, "built") for e in exes)
    assert {line["cache"] for line in lines} == {str(cache_dir)}
    hits = jitflow.build_all([jitflow.compile(kernels.axpb(s), "c", record=again) for s in (932.0, 933.0)],
                             backend="ray")
    assert [r.outcome for r in hits] == ["hit", "hit"]
    assert sorted(json.loads(line)["key"] for line in again.read_text().splitlines()) == sorted(e.key for e in exes)
