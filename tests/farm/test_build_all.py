"""build_all: many executables in parallel processes, per-item results, failures isolated."""
from __future__ import annotations

import io
import re
import time
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm

import jitflow
from jitflow.errors import InvalidInputError
from jitflow.farm import BuildResult
from jitflow.farm.progress import SweepProgress


def test_build_all_builds_in_parallel_and_reports_each(cache_dir):
    good = [jitflow.compile(kernels.axpb(500.0 + i), "c") for i in range(4)]
    bad = jitflow.compile(kernels.vecadd(), "cuda", arch="sm_90")      # loops not bound to threads
    twin = jitflow.compile(kernels.axpb(500.0), "c")                    # same key as good[0]
    results = jitflow.build_all(good[:2] + [bad] + good[2:] + [twin], jobs=2)
    assert [r.ok for r in results] == [True, True, False, True, True, True]
    assert results[2].error_type == "ScheduleError" and "not bound" in results[2].error
    assert [r.outcome for r in results if r.ok] == ["built"] * 5
    for i, exe in enumerate(good):
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
        np.testing.assert_allclose(c.numpy(), 500.0 + i + 1)
        assert exe.build_info.outcome == "hit"   # built by a worker, loaded from the cache here


def test_build_all_second_time_is_all_hits(cache_dir):
    exes = [jitflow.compile(kernels.axpb(600.0 + i), "c") for i in range(2)]
    jitflow.build_all(exes, jobs=2)
    again = jitflow.build_all([jitflow.compile(kernels.axpb(600.0 + i), "c") for i in range(2)], jobs=2)
    assert [r.outcome for r in again] == ["hit", "hit"]


def test_build_all_refuses_what_it_cannot_build_before_building(cache_dir):
    exe = jitflow.compile(kernels.axpb(650.0), "c")
    with pytest.raises(InvalidInputError, match="item 1 is a str, not an Executable"):
        jitflow.build_all([exe, "x"])
    with pytest.raises(InvalidInputError, match="item 1 is an IRModule, not an Executable"):
        jitflow.build_all([exe, kernels.axpb(650.0)])
    with pytest.raises(InvalidInputError, match="a list of Executables.*not Executable"):
        jitflow.build_all(exe)
    for jobs in (0, -2, 1.5, True):
        with pytest.raises(InvalidInputError, match="jobs must be a whole number"):
            jitflow.build_all([exe], jobs=jobs)
    assert exe.build_info is None and not list((cache_dir / "v1" / "entries").glob("*/*"))


def test_build_builds_without_loading_and_a_later_jit_is_a_hit(cache_dir):
    exe = jitflow.compile(kernels.axpb(3600.0), "c")
    info = exe.build()
    assert info.outcome == "built" and info is exe.build_info and info.library.is_file()
    assert repr(exe).endswith(" built>")          # built, not loaded
    assert exe.build().outcome == "hit"
    exe.jit()
    assert exe.build_info.outcome == "hit" and repr(exe).endswith(" loaded>")


def test_build_all_refuses_an_unknown_backend(cache_dir):
    with pytest.raises(InvalidInputError, match="backend must be one of 'local', 'ray'"):
        jitflow.build_all([jitflow.compile(kernels.axpb(651.0), "c")], backend="dask")


def test_sweep_progress_counts_built_hit_failed_and_the_rate():
    stream = io.StringIO()
    progress = SweepProgress(3, "here", mode="on", stream=stream, delay=0)
    for result in (BuildResult(None, True, "built"), BuildResult(None, True, "shared"), BuildResult(None, False)):
        progress.done(result)
    deadline = time.monotonic() + 30
    while not stream.getvalue() and time.monotonic() < deadline:   # the line is drawn by its thread
        time.sleep(0.01)
    progress.close()
    last = stream.getvalue().rstrip("\n").split("\r\x1b[2K")[-1]
    assert re.fullmatch(r"jitflow: building 3 executables here \| done: 3/3: 1 built, 1 hit, 1 failed, "
                        r"[0-9.]+/s \| [0-9.]+ s", last), last


@pytest.fixture
def deadly(monkeypatch):
    """The process that lowers axpb(777.5) kills itself with SIGKILL (as the OOM killer would); the
    forked workers inherit the patch, the caller never lowers it (build_all forks for 2 jobs)."""
    import os
    import signal

    from jitflow.builder import lower

    original = lower.lower

    def lower_or_die(mod, *args, **kwargs):
        if "777.5" in mod.script():
            os.kill(os.getpid(), signal.SIGKILL)
        return original(mod, *args, **kwargs)

    monkeypatch.setattr(lower, "lower", lower_or_die)


def _check_axpb(exe, scale: float) -> None:
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), scale + 1)


@pytest.mark.parametrize("batch", [1, 3])
def test_a_worker_killed_mid_build_fails_its_item_and_the_others_go_on(cache_dir, deadly, batch):
    """It raised BrokenProcessPool for the whole sweep. In a batch, which item killed the process is
    not known: the others are built again, each alone, and only the killer fails."""
    scales = [41.0 + batch, 777.5, 43.0 + batch, 44.0 + batch, 45.0 + batch]
    exes = [jitflow.compile(kernels.axpb(s), "c") for s in scales]
    results = jitflow.build_all(exes, jobs=2, batch=batch)
    assert [r.ok for r in results] == [True, False, True, True, True], results
    assert results[1].error_type == "BuildProcessDiedError"
    assert "was killed by SIGKILL (signal 9)" in results[1].error and exes[1].key[:12] in results[1].error
    assert not exes[1].cached()
    for scale, exe in zip(scales, exes):
        if scale != 777.5:
            _check_axpb(exe, scale)
            assert exe.build_info.outcome == "hit"


def test_the_meta_schedule_builder_reports_a_killed_candidate_and_builds_the_rest(cache_dir, deadly):
    pytest.importorskip("psutil", reason="MetaSchedule needs the tune extra: pip install 'jitflow[tune]'")
    from tvm.s_tir import meta_schedule as ms

    from jitflow.meta_schedule import Builder

    target = tvm.target.Target("llvm")
    inputs = [ms.builder.BuilderInput(kernels.axpb(s), target) for s in (61.0, 777.5, 63.0)]
    results = Builder(jobs=2).build(inputs)
    assert [r.error_msg is None for r in results] == [True, False, True], results
    assert results[1].error_msg.startswith("jitflow.meta_schedule.Builder: BuildProcessDiedError: ")
    assert "SIGKILL" in results[1].error_msg
    for r in (results[0], results[2]):
        assert r.artifact_path is not None and Path(r.artifact_path).is_file()
