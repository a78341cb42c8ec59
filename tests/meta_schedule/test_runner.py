"""jitflow.meta_schedule.Runner in real MetaSchedule tuning: a CPU kernel tuned end to end with it, a
candidate that crashes its measuring process or runs past the limit failing alone while the others
are timed, and its argument checks."""
from __future__ import annotations

import os

import kernels
import numpy as np
import pytest
import tvm
from tuning import best_matmul_runs_on_the_gpu, QUICK, matmul, measured, meta_schedule_logging, quick_space, target
from tvm.script import tirx as T

pytest.importorskip("psutil", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")
pytest.importorskip("cloudpickle", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

import jitflow  # noqa: E402
from jitflow.meta_schedule import Builder, Runner  # noqa: E402

#: real tuning and measuring processes: `make test-tune`
pytestmark = pytest.mark.tune


@T.prim_func
def wild_store(A: T.Buffer((16,), "float32")):
    """Writes a terabyte past its buffer: a segfault."""
    T.func_attr({"global_symbol": "main"})
    for i in range(16):
        A[(T.int64(1) << T.int64(40)) + T.Cast("int64", i)] = T.float32(1)


@T.prim_func
def endless(A: T.Buffer((16,), "float32")):
    """2**60 steps of work: runs past any time limit."""
    T.func_attr({"global_symbol": "main"})
    for i in range(T.int64(1) << T.int64(60)):
        A[T.Cast("int32", i % T.int64(16))] = A[T.Cast("int32", (i + T.int64(1)) % T.int64(16))] + T.float32(1)


@T.prim_func
def wild_store_late(A: T.Buffer((16,), "float32")):
    """2**27 steps of work, then a store a terabyte past its buffer: a segfault a while into its run."""
    T.func_attr({"global_symbol": "main"})
    for i in range(T.int64(1) << T.int64(27)):
        A[T.Cast("int32", i % T.int64(16))] = A[T.Cast("int32", (i + T.int64(1)) % T.int64(16))] + T.float32(1)
    for i in range(16):
        A[(T.int64(1) << T.int64(40)) + T.Cast("int64", i)] = T.float32(1)


def _inputs(mods: list, builder: Builder) -> list:
    """RunnerInputs of `mods` built by `builder` (as MetaSchedule hands them to the runner)."""
    results = builder.build([ms.builder.BuilderInput(m, target()) for m in mods])
    assert all(r.error_msg is None for r in results), [r.error_msg for r in results]
    return [ms.runner.RunnerInput(r.artifact_path, "cpu", ms.arg_info.ArgInfo.from_prim_func(m["main"]))
            for r, m in zip(results, mods)]


def test_runner_tunes_a_cpu_kernel_end_to_end(tmp_path, cache_dir):
    runner = Runner(evaluator_config=QUICK)
    meta_schedule_logging()
    database = ms.tune_tir(matmul(), target(), str(tmp_path / "tune"), max_trials_global=16, num_trials_per_iter=8,
                           builder=Builder(jobs=2), runner=runner, cost_model="random", seed=7,
                           num_tuning_cores=1, space=quick_space(), strategy="replay-trace")
    stats = runner.stats()
    runner.close()
    assert len(measured(database)) == 16                        # every candidate timed, none failed
    assert stats["candidates"] == 16 and stats["failed"] == 0 and stats["evaluator s"] > 0
    assert stats["replaced"] == 0 and stats["crashed"] == 0
    sch = ms.tir_integration.compile_tir(database, matmul(), target())
    exe = jitflow.compile(sch.mod, target())
    assert exe.cached()                                         # the best record: the library that was timed
    a, b = np.random.rand(128, 128).astype("float32"), np.random.rand(128, 128).astype("float32")
    c = tvm.runtime.tensor(np.zeros((128, 128), "float32"))
    exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_a_candidate_that_crashes_or_hangs_fails_alone_and_the_others_are_timed(cache_dir):
    builder = Builder(jobs=2)
    good = kernels.matmul(32)
    inputs = _inputs([good, tvm.IRModule({"main": wild_store}), good, tvm.IRModule({"main": endless}), good], builder)
    runner = Runner(timeout_s=3, evaluator_config=QUICK)
    results = [f.result() for f in runner.run(inputs)]
    crashed, hung = results[1].error_msg, results[3].error_msg
    assert crashed.startswith("jitflow.meta_schedule.Runner: the candidate crashed the process measuring it on cpu: "
                              "SIGSEGV (signal 11)")
    assert "the process was replaced and the other candidates went on" in crashed.splitlines()[0]
    assert hung.startswith("jitflow.meta_schedule.Runner: the candidate ran past the runner's time limit of 3 s on cpu")
    for i in (0, 2, 4):
        assert results[i].error_msg is None and 0 < float(results[i].run_secs[0]) < 1, results[i].error_msg
    stats = runner.stats()
    assert stats["crashed"] == 1 and stats["timed out"] == 1 and stats["replaced"] == 2 and stats["failed"] == 2
    again = [f.result() for f in runner.run([inputs[0]])]       # the replacement process times the next batch
    assert again[0].error_msg is None
    runner.close()
    after = [f.result() for f in runner.run([inputs[2]])]       # started again after close(): no replacement
    assert after[0].error_msg is None and runner.stats()["replaced"] == 2
    runner.close()
    for i in inputs:
        assert os.path.isfile(i.artifact_path)                # the runner leaves artifacts to MetaSchedule


def test_the_gpu_way_spreads_prepares_and_isolates_a_crash_with_two_candidates_in_hand(cache_dir):
    """What a CUDA task's candidates go through (a process per GPU, each given the next candidate early
    to load while it times one), on two measuring processes timing CPU candidates: none is lost, both
    processes take some, and a crash with two candidates in hand fails only the one that crashed."""
    from jitflow.meta_schedule.gpus import Gpu
    from jitflow.meta_schedule.measure_pool import Pool

    good = kernels.matmul(32)
    mods = [good, good, tvm.IRModule({"main": wild_store_late}), good, good, good]
    inputs = _inputs(mods, Builder(jobs=2))
    runner = Runner(evaluator_config=QUICK)
    runner.pool.close()
    fake = [Gpu(i, "simulated", "sm_90", f"GPU-{i:08x}-0000-0000-0000-000000000000") for i in range(2)]
    runner.pool = Pool(fake, 20.0)
    jobs = [runner._job(i) for i in inputs]
    runner.pool.measure(jobs, [0, 1], depth=2)
    runner.pool.close()
    assert [j.error is None for j in jobs] == [True, True, False, True, True, True], [j.error for j in jobs]
    assert "SIGSEGV" in jobs[2].error and jobs[2].alone            # measured again alone, then failed alone
    assert {j.device for j in jobs} == {str(g) for g in fake}       # both processes timed candidates
    assert all(j.seconds["evaluator"] > 0 for j in jobs if j.error is None)


def test_the_runner_checks_its_arguments():
    for bad in (0, -1, True, "5"):
        with pytest.raises(jitflow.errors.InvalidInputError, match="timeout_s must be"):
            Runner(timeout_s=bad)
    with pytest.raises(jitflow.errors.InvalidInputError, match="alloc_repeat must be"):
        Runner(alloc_repeat=0)
    with pytest.raises(jitflow.errors.InvalidInputError, match=r"devices=\[99\]: no visible GPU numbered 99"):
        Runner(devices=[99])
    with pytest.raises(jitflow.errors.InvalidInputError, match="devices must be a list of CUDA device numbers"):
        Runner(devices="0")


CUDA_TARGET = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152}


@T.prim_func
def wild_cuda_store(A: T.Buffer((64,), "float32")):
    """Each thread writes a terabyte past the buffer: an illegal address on the GPU."""
    T.func_attr({"global_symbol": "main"})
    for i in T.thread_binding(64, thread="threadIdx.x"):
        A[(T.int64(1) << T.int64(40)) + T.Cast("int64", i)] = T.float32(1)


@pytest.mark.gpu
def test_cuda_tune_tir_with_the_runner_on_every_gpu_of_one_model(tmp_path, cache_dir):
    from jitflow.meta_schedule import gpus

    target = tvm.target.Target(dict(CUDA_TARGET, arch=gpus.visible()[0].arch), host={"kind": "llvm", "num-cores": 4})
    runner = Runner()
    meta_schedule_logging()
    database = ms.tune_tir(matmul(), target, str(tmp_path / "tune"), max_trials_global=16, num_trials_per_iter=16,
                           builder=Builder(jobs=4), runner=runner, cost_model="random", seed=7)
    stats = runner.stats()
    runner.close()
    assert len(measured(database)) >= 12 and stats["candidates"] == 16
    timed_on = {k: v for k, v in stats.items() if k.startswith("timed on cuda:")}
    assert len(timed_on) == len(runner.same_model) and all(v > 0 for v in timed_on.values())   # spread over all
    best_matmul_runs_on_the_gpu(database, target)


@pytest.mark.gpu
def test_an_illegal_address_fails_its_candidate_alone_on_the_gpu(cache_dir):
    from jitflow.meta_schedule import gpus

    target = tvm.target.Target(dict(CUDA_TARGET, arch=gpus.visible()[0].arch), host={"kind": "llvm", "num-cores": 4})
    good = kernels.vecadd_cuda()
    mods = [good, tvm.IRModule({"main": wild_cuda_store}), good]
    built = Builder(jobs=2).build([ms.builder.BuilderInput(m, target) for m in mods])
    assert all(r.error_msg is None for r in built), [r.error_msg for r in built]
    inputs = [ms.runner.RunnerInput(r.artifact_path, "cuda", ms.arg_info.ArgInfo.from_prim_func(m["main"]))
              for r, m in zip(built, mods)]
    runner = Runner(devices=[0], evaluator_config=QUICK)
    results = [f.result() for f in runner.run(inputs)]
    runner.close()
    assert results[0].error_msg is None and results[2].error_msg is None
    assert results[1].error_msg.startswith("jitflow.meta_schedule.Runner: ")
    assert "illegal" in results[1].error_msg.lower() or "crashed" in results[1].error_msg
