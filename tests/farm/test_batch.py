"""build_all(batch=N): several items' host C compiled by one compiler process, each its own object;
the libraries are byte for byte those built one at a time, and a failure or a timeout stays its
item's own."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import kernels
import numpy as np
import pytest
import tvm
from conftest import use_cache

import jitflow
from jitflow.builder.host_c import compile as host_compile
from jitflow.errors import InvalidInputError
from jitflow.targets import machine_host
from jitflow.toolchain.zig_cc import cc1_batch, zig
from jitflow.toolchain.deadline import Deadline


@pytest.fixture
def shared_processes(monkeypatch, zig_cache):
    """The groups of requests each shared compiler process ran (their source files); skips where zig's
    compiler proper command is not known here (then every compile is zig cc's own, nothing shared).
    A file is never given back for being slow (PATIENCE_S): on a busy machine the first file, which
    also pays the process's start, could take longer than that and change the groups counted."""
    from jitflow.builder.steps import _include_dirs

    includes = tuple(f"-I{d}" for d in _include_dirs())
    probe = zig._compile_probe(machine_host(), includes, str(zig_cache), None, ())
    if probe is None or probe.compiler_proper() is None:
        pytest.skip("zig's compiler proper command could not be probed here (a venv linked from elsewhere)")
    runs: list[list[Path]] = []
    original = cc1_batch._one_process

    def recorded(group, settled):
        if len(group) > 1:
            runs.append([r.source for r in group])
        return original(group, settled)

    monkeypatch.setattr(cc1_batch, "_one_process", recorded)
    monkeypatch.setattr(cc1_batch, "PATIENCE_S", 600.0)
    return runs


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _candidates(count: int) -> list:
    mods = []
    for n in range(count):
        sch = tvm.s_tir.Schedule(kernels.matmul(32))
        i, j, k = sch.get_loops(sch.get_sblock("C"))
        sch.split(i, [None, 2 ** (n % 4)])
        sch.split(j, [None, 2 ** (n // 4 + 1)])
        mods.append(sch.mod)
    return mods


def test_a_batched_library_is_byte_identical_to_a_solo_build(tmp_path, zig_cache, monkeypatch, shared_processes):
    mods = _candidates(5) + [kernels.axpb(3.0)]
    use_cache(monkeypatch, tmp_path / "batched", zig_cache)
    batched = [jitflow.compile(m, "c") for m in mods]
    results = jitflow.build_all(batched, jobs=1, batch=4)
    assert [r.outcome for r in results] == ["built"] * len(mods)
    assert [len(run) for run in shared_processes] == [4, 2]      # two processes compiled all six
    use_cache(monkeypatch, tmp_path / "solo", zig_cache)
    solo = [jitflow.compile(m, "c") for m in mods]
    assert [r.outcome for r in jitflow.build_all(solo, jobs=1)] == ["built"] * len(mods)
    for b, s in zip(batched, solo):
        assert b.key == s.key
        assert _sha(b.build().library) == _sha(s.build().library)
    a = np.random.default_rng(0).standard_normal((32, 32)).astype("float32")
    c = tvm.runtime.tensor(np.zeros((32, 32), "float32"))
    b = np.random.default_rng(1).standard_normal((32, 32)).astype("float32")
    batched[3]["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def _changed_for_one(monkeypatch, marker: str, extra: str) -> None:
    """The host C of the item whose C holds `marker` (a constant of its kernel) gets `extra` at its end."""
    original = host_compile.HostCompile.__init__

    def changed(self, source, text, *args, **kwargs):
        if marker in text:
            text += extra
            source.write_text(text)
        original(self, source, text, *args, **kwargs)

    monkeypatch.setattr(host_compile.HostCompile, "__init__", changed)


def test_a_candidate_that_fails_in_a_batch_fails_alone_with_its_own_error(cache_dir, monkeypatch, shared_processes):
    _changed_for_one(monkeypatch, "7.7725", "\n#error the second item is broken\n")     # axpb(777.25)
    exes = [jitflow.compile(kernels.axpb(v), "c") for v in (11.0, 777.25, 13.0, 14.0)]
    results = jitflow.build_all(exes, jobs=1, batch=4)
    assert [r.ok for r in results] == [True, False, True, True]
    assert results[1].error_type == "HostCodeError" and "the second item is broken" in results[1].error
    assert not exes[1].cached()
    assert [len(run) for run in shared_processes] == [4, 2]     # the two after it went on in a new process
    for v, exe in zip((11.0, 13.0, 14.0), [exes[0], *exes[2:]]):
        out = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), out)
        np.testing.assert_allclose(out.numpy(), v + 1)


@pytest.mark.slow
def test_an_items_time_limit_is_not_charged_for_the_others_lowering(cache_dir, monkeypatch, shared_processes):
    """The last member lowers for longer than the limit: it fails (its own lowering), while the three
    that waited for it to hand over its C (paused, their limits untouched) are built, together."""
    from jitflow.builder import lower

    original = lower.lower

    def slow_for_one(mod, *args, **kwargs):
        if "666.25" in mod.script():            # axpb(666.25)
            time.sleep(7.0)
        return original(mod, *args, **kwargs)

    monkeypatch.setattr(lower, "lower", slow_for_one)
    exes = [jitflow.compile(kernels.axpb(v), "c") for v in (31.0, 32.0, 33.0, 666.25)]
    results = jitflow.build_all(exes, jobs=1, batch=4, timeout_s=6)
    assert [r.ok for r in results] == [True, True, True, False], results
    assert results[3].error_type == "BuildTimeoutError" and "lowering with TVM" in results[3].error
    assert [len(run) for run in shared_processes] == [3]
    for v, exe in zip((31.0, 32.0, 33.0), exes):
        out = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), out)
        np.testing.assert_allclose(out.numpy(), v + 1)


def test_a_file_is_not_charged_for_the_files_ahead_of_it_in_the_shared_process(tmp_path, zig_cache, monkeypatch,
                                                                               shared_processes):
    """The first file holds the shared process for 3 s (it includes a pipe the test writes to
    late); the second, with 2 s left on its paused limit, is compiled within its own time after it,
    and is charged only for its own file."""
    import threading

    from jitflow.builder.steps import _include_dirs

    fifo = tmp_path / "late.h"
    os.mkfifo(fifo)
    prelude = '#include "tvm/ffi/c_api.h"\n#include <stdint.h>\n'
    texts = [prelude + f'int early;\n#include "{fifo}"\nint f(int x) {{ return x + LATE; }}\n',
             prelude + "int g(int x) { return x * 3; }\n"]
    deadline = Deadline.after(2.0)
    requests = []
    for n, text in enumerate(texts):
        folder = tmp_path / f"b{n}"
        folder.mkdir()
        (folder / "host_0.c").write_text(text)
        r = cc1_batch.request(folder / "host_0.c", folder / "host_0.o", _include_dirs(), machine_host(),
                              zig_cache, None, deadline if n == 1 else None)
        assert r is not None
        requests.append(r)

    def write_late():
        time.sleep(3.0)
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:       # once the compiler has opened the pipe to read it
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)
                continue
            os.write(fd, b"#define LATE 1\n")
            os.close(fd)
            return

    writer = threading.Thread(target=write_late, daemon=True)
    writer.start()
    with deadline.paused():
        cc1_batch.compile_all(requests)
    writer.join()
    assert [r.outcome for r in requests] == [cc1_batch.BUILT, cc1_batch.BUILT]
    assert len(shared_processes) == 1 and requests[0].own_s >= 2.9 > requests[1].own_s
    assert deadline.left() > 0


def _slow_c(functions: int = 24, statements: int = 2000) -> str:
    """C that clang takes a second per function over at -O2 (on a busy 2-core machine): long chains of
    float arithmetic, each function small enough to be compiled with zig's flags alone."""
    out = []
    for f in range(functions):
        body = "".join(f"  x = x * {1.0 + n % 7 / 10:.1f}f + a[{(n * 7 + f) % 61}];\n  a[{n % 53}] = x;\n"
                       for n in range(statements))
        out.append(f"\nfloat jitflow_slow_{f}(float *a) {{\n  float x = a[0];\n{body}  return x;\n}}\n")
    return "".join(out)


@pytest.mark.slow
def test_a_candidate_past_its_timeout_in_a_batch_fails_alone(cache_dir, monkeypatch, shared_processes):
    _changed_for_one(monkeypatch, "5.5525", _slow_c())        # axpb(555.25)
    monkeypatch.setattr(host_compile, "BATCH_MAX_BYTES", 1 << 30)     # let it in: it is large
    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "1")                     # and compiled as one piece
    monkeypatch.setattr(cc1_batch, "PATIENCE_S", 2.0)                 # given back after 2 s, as shipped
    exes = [jitflow.compile(kernels.axpb(v), "c") for v in (21.0, 555.25, 23.0)]
    start = time.monotonic()
    results = jitflow.build_all(exes, jobs=1, batch=3, timeout_s=8)
    assert time.monotonic() - start < 60
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error_type == "BuildTimeoutError" and "8 s" in results[1].error
    assert not exes[1].cached() and not list((cache_dir / "v1" / "staging").iterdir())
    assert [len(run) for run in shared_processes] == [3]   # the slow one went on alone, and so did the last
    for v, exe in ((21.0, exes[0]), (23.0, exes[2])):
        out = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), out)
        np.testing.assert_allclose(out.numpy(), v + 1)


@pytest.mark.slow
def test_the_shared_process_is_killed_at_a_requests_deadline_and_the_rest_go_on(tmp_path, zig_cache, monkeypatch,
                                                                               shared_processes):
    """The shared process itself: the file past its deadline there is killed with it, reported as timed
    out, leaves no partial object, and the files after it are compiled by a new process."""
    from jitflow.builder.steps import _include_dirs

    prelude = '#include "tvm/ffi/c_api.h"\n#include <stdint.h>\n'
    requests = []
    for n, text in enumerate([prelude + "int f(int x) { return x + 1; }\n", prelude + _slow_c(),
                              prelude + "int g(int x) { return x * 3; }\n"]):
        folder = tmp_path / f"b{n}"
        folder.mkdir()
        (folder / "host_0.c").write_text(text)
        r = cc1_batch.request(folder / "host_0.c", folder / "host_0.o", _include_dirs(), machine_host(),
                              zig_cache, None, Deadline.after(3.0) if n == 1 else None)
        assert r is not None
        requests.append(r)
    cc1_batch.compile_all(requests)
    assert [r.outcome for r in requests] == [cc1_batch.BUILT, cc1_batch.TIMED_OUT, cc1_batch.ALONE]
    pids = requests[1].processes
    assert len(pids) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)                      # killed and reaped
    assert (tmp_path / "b0" / "host_0.o").is_file()
    assert sorted(p.name for p in (tmp_path / "b1").iterdir()) == ["host_0.c"]
    err = cc1_batch.timeout_error(requests[1])
    assert "3 s" in str(err) and err.source_path == tmp_path / "b1" / "host_0.c"


def test_batch_is_checked_before_anything_is_built(cache_dir, monkeypatch):
    exe = jitflow.compile(kernels.axpb(1.0), "c")
    for bad in (0, -1, 1.5, True, "8", 10_000):
        with pytest.raises(InvalidInputError, match="batch must be a whole number"):
            jitflow.build_all([exe], batch=bad)
    monkeypatch.setenv("JITFLOW_BUILD_BATCH", "lots")
    with pytest.raises(InvalidInputError, match="JITFLOW_BUILD_BATCH"):
        jitflow.build_all([exe])
    assert not exe.cached()
