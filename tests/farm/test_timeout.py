"""Bounded builds: a build past its timeout_s has its compiler killed, is reported as its item's error,
leaves nothing in staging and makes no cache entry; the farm worker's environment is left alone."""
from __future__ import annotations

import json
import os
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm

import jitflow
from jitflow.errors import BuildTimeoutError, InvalidInputError
from jitflow.farm import request, worker
from jitflow.toolchain.zig_cc import zig

#: builds that run into their time limit: `make test-faults`, not `make test`
pytestmark = pytest.mark.slow


@pytest.fixture
def stuck_compiler(monkeypatch, tmp_path):
    """Every host C compile becomes a real process that would run for ten minutes; its pid is written
    to the returned folder (one file per process) so the test can see that it was killed."""
    pids = tmp_path / "pids"
    pids.mkdir()

    def compile_object(source, out, include_dirs, host, zig_cache, local_cache=None, cpu=None, extra=(),
                       deadline=None):
        stuck = ["sh", "-c", f'echo $$ > "{pids}/$$"; exec sleep 600']
        return zig.Job(["-c", str(source)], cwd=out.parent, zig_cache=zig_cache, source=source,
                       local_cache=local_cache, direct=stuck)

    monkeypatch.setattr(zig, "compile_object", compile_object)
    return pids


def _killed(pids: Path) -> list[int]:
    found = [int(p.name) for p in pids.iterdir()]
    assert found, "the stuck compiler never started"
    for pid in found:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)            # killed and reaped, not left running
    return found


def _nothing_left(cache_dir: Path, exe) -> None:
    assert not list((cache_dir / "v1" / "staging").iterdir())
    assert not list((cache_dir / "v1" / "entries").glob("*/*")) and not exe.cached()


def test_a_build_past_its_timeout_is_killed_and_reported_and_leaves_nothing(cache_dir, stuck_compiler):
    exe = jitflow.compile(kernels.axpb(4100.0), "c")
    other = jitflow.compile(kernels.axpb(4101.0), "c")
    results = jitflow.build_all([exe, other], jobs=1, timeout_s=3)
    assert [r.ok for r in results] == [False, False]
    assert {r.error_type for r in results} == {"BuildTimeoutError"}
    assert results[0].error.startswith("zig cc was killed at the build's time limit of 3 s; source kept at ")
    kept = Path(results[0].error.split("source kept at: ")[1].splitlines()[0])
    assert kept.name == "host.c" and kept.is_file()         # the whole file, kept with the failed builds
    assert len(_killed(stuck_compiler)) >= 2
    _nothing_left(cache_dir, exe)
    with pytest.raises(BuildTimeoutError):
        exe.build(timeout_s=2)


def test_after_a_timeout_the_same_item_builds(cache_dir, monkeypatch, tmp_path):
    exe = jitflow.compile(kernels.axpb(4102.0), "c")
    real = zig.compile_object
    with monkeypatch.context() as patch:
        patch.setattr(zig, "compile_object", lambda source, out, *a, **k: zig.Job(
            ["-c", str(source)], out.parent, a[2], source, direct=["sleep", "600"]))
        assert not jitflow.build_all([exe], jobs=1, timeout_s=2)[0].ok
    assert zig.compile_object is real
    assert [r.outcome for r in jitflow.build_all([exe], jobs=2, timeout_s=60)] == ["built"]
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), 4103.0)


def test_forked_workers_kill_their_compilers_too(cache_dir, stuck_compiler):
    exes = [jitflow.compile(kernels.axpb(4110.0 + i), "c") for i in range(2)]
    results = jitflow.build_all(exes, jobs=2, timeout_s=3)
    assert [r.error_type for r in results] == ["BuildTimeoutError"] * 2
    _killed(stuck_compiler)
    for exe in exes:
        _nothing_left(cache_dir, exe)


def test_timeouts_are_checked_before_anything_is_built(cache_dir):
    exe = jitflow.compile(kernels.axpb(4120.0), "c")
    for bad in (0, -1, True, "5", float("inf"), float("nan")):
        with pytest.raises(InvalidInputError, match="timeout_s must be a number of seconds"):
            jitflow.build_all([exe], timeout_s=bad)
        with pytest.raises(InvalidInputError, match="timeout_s must be a number of seconds"):
            exe.build(timeout_s=bad)
    assert exe.build_info is None


def test_a_farm_worker_applies_the_timeout_and_leaves_the_environment_alone(cache_dir, stuck_compiler,
                                                                           monkeypatch, tmp_path):
    monkeypatch.delenv("JITFLOW_BUILD_JOBS", raising=False)
    exe = jitflow.compile(kernels.axpb(4130.0), "c")
    wire = json.loads(json.dumps(request.make(exe, str(tmp_path / "elsewhere"), timeout_s=2).wire))
    assert request.executable(wire, []).settings.build_jobs == 1     # one compiler, said in its settings
    reply = worker.run(wire)
    assert not reply["ok"] and reply["error_type"] == "BuildTimeoutError"
    assert "JITFLOW_BUILD_JOBS" not in os.environ
    assert jitflow.compile(kernels.axpb(4131.0), "c").settings.build_jobs is None
    _killed(stuck_compiler)


def test_a_limit_that_passes_while_tvm_lowers_fails_the_build_when_lowering_ends(cache_dir):
    exe = jitflow.compile(kernels.axpb(4140.0), "c")
    with pytest.raises(BuildTimeoutError, match=r"^lowering with TVM ran past the build's time limit of 0.001 s \(it "
                                                r"cannot be interrupted: the build stopped when it ended\)"):
        exe.build(timeout_s=0.001)          # lowering alone takes longer: nothing is compiled after it
    _nothing_left(cache_dir, exe)
    assert exe.build(timeout_s=120).outcome == "built"
