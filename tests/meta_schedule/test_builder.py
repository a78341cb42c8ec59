"""jitflow.meta_schedule.Builder in real MetaSchedule tuning: tune_tir with the random cost model and
LocalRunner (one tuning, shared by the tests: MetaSchedule's start-up is slow), a Relax model through
jitflow.meta_schedule.tune_relax, the cache in tuning (reruns are hits, entries labelled, the best
record built afterwards is a hit), artifacts that are copies, failures carrying jitflow's message."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kernels
import models
import numpy as np
import pytest
import tvm
from conftest import module_cache
from tuning import best_matmul_runs_on_the_gpu, QUICK, STRATEGY, TARGET, candidate_hash, matmul, meta_schedule_logging, quick_runner, quick_space

pytest.importorskip("psutil", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")
pytest.importorskip("cloudpickle", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

import jitflow  # noqa: E402
from jitflow.cache.store import counters  # noqa: E402
from jitflow.meta_schedule import Builder, Runner, seeded  # noqa: E402
from jitflow.runtime import cpu_features  # noqa: E402

#: a real tuning takes a minute on 2 cores: `make test-tune` runs these (CI too), `make test` leaves them out
pytestmark = pytest.mark.tune


def tune(work: Path, builder: Builder, target=None, trials: int = 16):
    """A real tune_tir of a 128x128x128 matmul into `work`: the random cost model, seed 7 and one search
    thread (num_tuning_cores=1: the same candidates on every run), MetaSchedule's LocalRunner."""
    meta_schedule_logging()
    return ms.tune_tir(matmul(), target or tvm.target.Target(TARGET), str(work), max_trials_global=trials,
                       num_trials_per_iter=8, builder=builder, runner=quick_runner(), cost_model="random", seed=7,
                       num_tuning_cores=1, space=quick_space(), strategy=STRATEGY)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, zig_cache):
    """One real tuning (tune()) with jitflow's builder, shared by the tests."""
    with module_cache(tmp_path_factory, zig_cache) as cache:
        builder = Builder(jobs=2, timeout_s=60)
        database = tune(tmp_path_factory.mktemp("tune"), builder)
        yield cache, database, tvm.target.Target(TARGET), builder


def _candidates(database, target) -> list:
    """The BuilderInputs of every candidate the database recorded."""
    records = database.get_all_tuning_records()
    assert records
    return [ms.builder.BuilderInput(r.as_measure_candidate().sch.mod, target) for r in records]


def test_tune_tir_measures_candidates_built_by_jitflow(tuned):
    _cache, database, target, _builder = tuned
    measured = [r for r in database.get_all_tuning_records() if r.run_secs and all(float(s) < 1e9 for s in r.run_secs)]
    assert len(measured) >= 4                 # LocalRunner loaded and timed jitflow's libraries
    sch = ms.tir_integration.compile_tir(database, matmul(), target)
    assert sch is not None
    exe = jitflow.compile(sch.mod, target)
    assert exe.cached()                      # the best record, built afterwards: a cache hit
    a, b = np.random.rand(128, 128).astype("float32"), np.random.rand(128, 128).astype("float32")
    c = tvm.runtime.tensor(np.zeros((128, 128), "float32"))
    exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    assert exe.build_info.outcome == "hit"
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    again = jitflow.compile(sch.mod, "llvm")      # the way a user would write it: the same library
    assert again.key == exe.key


def test_a_rerun_over_the_same_candidates_builds_nothing_and_stats_show_the_hits(tuned):
    cache, database, target, builder = tuned
    inputs = _candidates(database, target)
    before = counters.read(cache / "v1")
    results = builder.build(inputs)
    after = counters.read(cache / "v1")
    assert all(r.error_msg is None for r in results)
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + len(inputs)
    for r in results:
        shutil.rmtree(os.path.dirname(r.artifact_path))
    stats = json.loads(subprocess.run([sys.executable, "-m", "jitflow", "cache", "stats", "--json"],
                                      capture_output=True, text=True, check=True).stdout)
    assert stats["hits"] >= len(inputs)


def test_the_same_search_run_again_draws_the_same_candidates_and_builds_nothing(tuned, tmp_path):
    cache, database, _target, _builder = tuned
    before = counters.read(cache / "v1")
    again = tune(tmp_path / "again", Builder(jobs=2, timeout_s=60))       # a fresh work folder, the same seed
    after = counters.read(cache / "v1")
    assert after["builds"] == before["builds"]
    assert after["hits"] - before["hits"] == len(again.get_all_tuning_records()) == 16
    first = {candidate_hash(r) for r in database.get_all_tuning_records()}
    assert {candidate_hash(r) for r in again.get_all_tuning_records()} == first


def test_the_default_search_run_again_with_its_seed_draws_the_same_candidates(tmp_path, cache_dir):
    """The evolutionary search with XGBoost's cost model, MetaSchedule's defaults (a smaller population):
    its first round repeats when numpy's random state, which that model draws from, is seeded too."""
    runner = Runner(evaluator_config=QUICK)

    def run(work: Path):
        meta_schedule_logging()
        strategy = ms.search_strategy.EvolutionarySearch(population_size=32, init_min_unmeasured=16,
                                                         genetic_num_iters=2)
        with seeded(7):
            return ms.tune_tir(matmul(), tvm.target.Target(TARGET), str(work), max_trials_global=8,
                               num_trials_per_iter=8, builder=Builder(jobs=2), runner=runner, seed=7,
                               num_tuning_cores=1, space=quick_space(), strategy=strategy)

    first = run(tmp_path / "first")
    before = counters.read(cache_dir / "v1")
    again = run(tmp_path / "again")
    after = counters.read(cache_dir / "v1")
    assert len(again.get_all_tuning_records()) == 8
    assert {candidate_hash(r) for r in again.get_all_tuning_records()} == \
        {candidate_hash(r) for r in first.get_all_tuning_records()}
    assert after["builds"] == before["builds"] and after["hits"] - before["hits"] == 8
    runner.close()


def test_a_build_timeout_leads_with_the_limit_and_the_kept_source(cache_dir, monkeypatch):
    from jitflow.toolchain.zig_cc import zig

    def stuck(source, out, include_dirs, host, zig_cache, local_cache=None, cpu=None, extra=(), deadline=None):
        return zig.Job(["-c", str(source)], cwd=out.parent, zig_cache=zig_cache, source=source,
                       local_cache=local_cache, direct=["sleep", "600"])

    monkeypatch.setattr(zig, "compile_object", stuck)          # forked build workers inherit it
    candidate = ms.builder.BuilderInput(kernels.axpb(4200.0), tvm.target.Target(TARGET))
    [result] = Builder(jobs=2, timeout_s=2).build([candidate])
    first = result.error_msg.splitlines()[0]
    assert first.startswith("jitflow.meta_schedule.Builder: BuildTimeoutError: zig cc was killed at the build's "
                            "time limit of 2 s; source kept at ")
    kept = Path(first.split("source kept at ")[1].split(";")[0])
    assert kept.name == "host.c" and kept.is_file() and kept.parents[2] == cache_dir / "v1" / "failed"
    assert "raise timeout_s (Builder(timeout_s=...)" in first


def test_compiling_a_tuned_candidate_at_another_cpu_level_says_so(tuned, caplog):
    _cache, database, target, _builder = tuned
    sch = ms.tir_integration.compile_tir(database, matmul(), target)
    said = "which jitflow.meta_schedule.Builder built and MetaSchedule measured at CPU level x86-64"
    caplog.set_level(logging.INFO, "jitflow")
    jitflow.compile(sch.mod, target)                                    # the target tuned for: nothing said
    jitflow.compile(sch.mod, "c")                                       # its level too (the baseline)
    assert not [r for r in caplog.records if said in r.getMessage()]
    jitflow.compile(sch.mod, {"kind": "llvm", "mcpu": "x86-64-v3"})
    [warning] = [r for r in caplog.records if said in r.getMessage()]
    assert warning.levelno == logging.WARNING and "compiled now at x86-64-v3" in warning.getMessage()
    assert "main candidate " in warning.getMessage()


def test_artifacts_are_copies_in_folders_of_their_own_and_removing_them_keeps_the_cache(tuned):
    cache, database, target, builder = tuned
    inputs = _candidates(database, target)[:3]
    results = builder.build(inputs)
    folders = [Path(r.artifact_path).parent for r in results]
    assert len(set(folders)) == len(folders) and all(cache not in f.parents for f in folders)
    for r in results:
        assert r.artifact_path.endswith(".so")
        tvm.runtime.load_module(r.artifact_path)          # dlopen: no compiler at load time
    for folder in folders:            # what MetaSchedule's RemoveBuildArtifact does
        shutil.rmtree(folder)
    exes = [jitflow.compile(i.mod, "c") for i in inputs]
    assert all(exe.cached() for exe in exes)


def test_entries_are_labelled_by_workload_and_candidate(tuned):
    cache, _database, _target, _builder = tuned
    listed = json.loads(subprocess.run([sys.executable, "-m", "jitflow", "cache", "ls", "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    names = [e.get("module") or e.get("name") for e in (listed["entries"] if isinstance(listed, dict) else listed)]
    labelled = [n for n in names if n and n.startswith("main candidate ")]
    assert len(labelled) >= 4 and len(set(labelled)) == len(labelled)


def test_a_failure_is_a_builder_result_with_jitflows_message(tuned):
    _cache, _database, _target, builder = tuned
    unbound = ms.builder.BuilderInput(kernels.vecadd(), tvm.target.Target({"kind": "cuda", "arch": "sm_90"}))
    good = _candidates(tuned[1], tuned[2])[:1]
    results = builder.build([unbound, *good])
    assert results[0].artifact_path is None
    assert results[0].error_msg.startswith("jitflow.meta_schedule.Builder: ScheduleError:")
    assert "not bound" in results[0].error_msg
    assert results[1].error_msg is None and os.path.isfile(results[1].artifact_path)
    shutil.rmtree(os.path.dirname(results[1].artifact_path))


def test_tuning_targets_are_built_as_compile_builds_them():
    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host={"kind": "llvm", "num-cores": 4})
    assert jitflow.compile(kernels.vecadd_cuda(), cuda).target.host == "x86_64-linux-gnu"
    [result] = Builder(jobs=1).build([ms.builder.BuilderInput(kernels.matmul(), tvm.target.Target({"kind": "opencl"}))])
    assert result.error_msg.startswith("jitflow.meta_schedule.Builder: TargetError:")
    assert "builds llvm (as the C host) and cuda targets, not 'opencl'" in result.error_msg
    with pytest.raises(jitflow.errors.InvalidInputError, match="jobs must be"):
        Builder(jobs=0)
    with pytest.raises(jitflow.errors.InvalidInputError, match="timeout_s must be"):
        Builder(timeout_s=-1)


@pytest.mark.skipif(not {"avx2", "fma"} <= set(cpu_features.this_cpu().features),
                    reason="candidates built for x86-64-v3 run on a CPU that has it")
def test_a_target_naming_a_cpu_level_tunes_and_compiles_at_it(tmp_path, cache_dir):
    """Tuned with mcpu set, the best record compiled with the same target is the library measured."""
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v3"})
    database = tune(tmp_path / "tune", Builder(jobs=2, timeout_s=60), target, trials=8)
    sch = ms.tir_integration.compile_tir(database, matmul(), target)
    exe = jitflow.compile(sch.mod, target)
    info = exe.build()
    assert info.outcome == "hit" and info.cpu_level == "x86-64-v3"
    a, b = np.random.rand(128, 128).astype("float32"), np.random.rand(128, 128).astype("float32")
    c = tvm.runtime.tensor(np.zeros((128, 128), "float32"))
    exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_a_relax_model_tuned_through_the_documented_call(tmp_path, cache_dir):
    weights = models.mlp_weights()
    meta_schedule_logging()
    tuned = jitflow.meta_schedule.tune_relax(models.mlp(weights=weights), TARGET, str(tmp_path / "tune"),
                                             max_trials_global=4, num_trials_per_iter=2,
                                             builder=Builder(jobs=2), cost_model="random", seed=3,
                                             space=quick_space(), strategy=STRATEGY, runner=quick_runner())
    scheduled = [f for f in tuned.functions.values()
                 if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled")]
    assert scheduled                                      # the database's schedules were applied
    x = np.random.rand(4, 16).astype("float32")
    out = jitflow.compile(tuned, "llvm").vm("cpu")["main"](tvm.runtime.tensor(x))
    np.testing.assert_allclose(out.numpy(), models.mlp_reference(x, weights), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_cuda_tune_tir_with_local_runner(tmp_path, cache_dir):
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024,
                                "max_shared_memory_per_block": 49152}, host={"kind": "llvm", "num-cores": 4})
    meta_schedule_logging()
    database = ms.tune_tir(matmul(), target, str(tmp_path / "tune"), max_trials_global=16,
                           num_trials_per_iter=8, builder=Builder(jobs=2), runner=ms.runner.LocalRunner(),
                           cost_model="random", seed=7)
    measured = [r for r in database.get_all_tuning_records() if r.run_secs and all(float(s) < 1e9 for s in r.run_secs)]
    assert measured
    best_matmul_runs_on_the_gpu(database, target)
