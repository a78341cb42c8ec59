"""Parallel loops at their edges: a task that fails before a barrier, a launch inside a task of another
launch (TVM's pool fails both), and extents at the top of the loop variable's range. Each runs in fresh
processes at TVM_NUM_THREADS 1, 2 and 7 (the pool reads it when it starts), with a time limit, so a
hang or a crash fails its test rather than the suite."""
from __future__ import annotations

import json
import os
import signal

import pytest
import tvm
from conftest import module_cache, run_python
from tvm.script import tirx as T

import jitflow

#: 2 threads in make test; 1 and 7 with the fault runs (make test-faults), each a fresh process
THREADS = [pytest.param(1, marks=pytest.mark.slow), 2, pytest.param(7, marks=pytest.mark.slow)]
#: far more than any of these processes needs, even on a busy machine: only a hang reaches it
LIMIT_S = 240
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


@T.prim_func
def _checked_before_barrier(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"),
                            C: T.Buffer((64,), "float32")):
    """B = A where every A < 0.5 (else an error), a barrier, then C = B reversed + 1."""
    with T.attr(0, "pragma_parallel_launch_point", 1):
        with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
            for i in T.parallel(64):
                assert A[i] < T.float32(0.5), "value too large"
                B[i] = A[i]
        with T.attr(0, "pragma_parallel_stride_pattern", 1):
            for i in T.parallel(64):
                C[i] = B[63 - i] + T.float32(1)


@T.prim_func
def _outer(A: T.Buffer((8,), "float32")):
    """Each iteration calls back into Python (test.inner(i)), which runs a kernel with its own launch."""
    for i in T.parallel(8):
        T.evaluate(T.call_packed("test.inner", i))
        A[i] = T.float32(1)


@T.prim_func
def _inner(B: T.Buffer((16,), "float32")):
    for i in T.parallel(16):
        B[i] = B[i] + T.float32(1)


#: the iterations of _span32 that report themselves: every multiple of SAMPLE, and the last
SAMPLE = 2**24


@T.prim_func
def _span32(D: T.Buffer((1,), "int8")):   # the tensor gives the packed call its device
    """A parallel loop over the largest int32 extent; a few iterations report their index
    (test.tally(i)), the others do nothing."""
    for i in T.parallel(2147483647):
        if i % 16777216 == 0 or i == 2147483646:
            T.evaluate(T.call_packed("test.tally", i))


@T.prim_func
def _stride32(D: T.Buffer((1,), "int8")):
    """_span32's loop, each task taking every num_task-th iteration from its id."""
    with T.attr(0, "pragma_parallel_launch_point", 1):
        with T.attr(0, "pragma_parallel_stride_pattern", 1):
            for i in T.parallel(2147483647):
                if i % 16777216 == 0 or i == 2147483646:
                    T.evaluate(T.call_packed("test.tally", i))


KERNELS = {"checked_before_barrier": _checked_before_barrier, "outer": _outer, "inner": _inner,
           "span32": _span32, "stride32": _stride32}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory, zig_cache):
    """The kernels as one exported library, and `inner` alone as another."""
    folder = tmp_path_factory.mktemp("parallel-faults")
    with module_cache(tmp_path_factory, zig_cache, "parallel-faults-cache"):
        jitflow.compile(tvm.IRModule({n: f.with_attr("global_symbol", n) for n, f in KERNELS.items()}),
                        "c").export_library(folder / "all.so")
        jitflow.compile(tvm.IRModule({"inner": _inner.with_attr("global_symbol", "inner")}),
                        "c").export_library(folder / "inner.so")
    return str(folder / "all.so"), str(folder / "inner.so")


def _child(threads, code):
    """The last line `code` prints (JSON), run at `threads` threads; a crash is a failure that names
    its signal, a hang one that names the limit."""
    proc = run_python(code, env={"TVM_NUM_THREADS": str(threads)}, timeout=LIMIT_S, check=False)
    if proc.returncode < 0:
        raise AssertionError(f"the process died of {signal.Signals(-proc.returncode).name}:\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


BARRIER = """
    import json, numpy as np, tvm
    lib = tvm.runtime.load_module({path!r})
    results = []
    for trial in range(8):
        a = np.linspace(0, 1, 64).astype("float32") if trial % 2 == 0 else np.linspace(0, 0.4, 64).astype("float32")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        try:
            lib["checked_before_barrier"](tvm.runtime.tensor(a), tvm.runtime.tensor(np.zeros(64, "float32")), c)
            results.append(bool(np.allclose(c.numpy(), a[::-1] + 1)))
        except Exception as exc:
            results.append(str(exc))
    print(json.dumps(results))
"""


@pytest.mark.parametrize("threads", THREADS)
def test_a_task_that_fails_before_a_barrier_is_an_error_not_a_hang(libraries, threads):
    """The failing task never reaches the barrier; the others leave it, and the caller gets the
    assert's message (TVM's LLVM build hangs here from 2 threads)."""
    results = _child(threads, BARRIER.format(path=libraries[0]))
    failed, passed = results[0::2], results[1::2]
    assert all(isinstance(r, str) and "value too large" in r for r in failed), failed
    assert passed == [True] * 4                       # and the library still works after each


NESTED = """
    import json, numpy as np, tvm, tvm_ffi
    lib = tvm.runtime.load_module({path!r})
    inner = lib if {same!r} else tvm.runtime.load_module({inner!r})
    b = tvm.runtime.tensor(np.zeros(16, "float32"))

    @tvm_ffi.register_global_func("test.inner")
    def run_inner(i):
        inner["inner"](b)
        return 0

    a = tvm.runtime.tensor(np.zeros(8, "float32"))
    lib["outer"](a)
    print(json.dumps([a.numpy().tolist(), b.numpy().tolist()]))
"""


@pytest.mark.parametrize("same", [True, False], ids=["same-library", "another-library"])
@pytest.mark.parametrize("threads", THREADS)
def test_a_launch_inside_a_task_runs_in_that_task(libraries, threads, same):
    """TVM's pool does not nest: at 2+ threads it throws through the C frames from a worker (the
    process aborts) and corrupts its launch from the calling thread (it hangs). The inner launch
    runs as one task in the outer task's thread instead, and both loops do all their work."""
    a, b = _child(threads, NESTED.format(path=libraries[0], inner=libraries[1], same=same))
    assert a == [1.0] * 8 and b == [8.0] * 16


SPAN = """
    import json, numpy as np, tvm, tvm_ffi
    lib = tvm.runtime.load_module({path!r})
    tallies = []

    @tvm_ffi.register_global_func("test.tally")
    def tally(i):
        tallies.append(int(i))
        return 0

    lib[{name!r}](tvm.runtime.tensor(np.zeros(1, "int8")))
    print(json.dumps(tallies))
"""


@pytest.mark.parametrize("name", ["span32", "stride32"], ids=["chunks", "stride"])
@pytest.mark.parametrize("threads", THREADS)
def test_the_largest_int32_extent_runs_its_last_iterations(libraries, threads, name):
    """`T.parallel(2**31 - 1)`: every task's chunk is computed without overflow, and a stride
    pattern's last step past the extent does not overflow, so the sampled iterations all run, each
    once (at 2 threads the chunks skipped the last ones, and the strides never ended)."""
    tallies = _child(threads, SPAN.format(path=libraries[0], name=name))
    assert sorted(tallies) == [*range(0, INT32_MAX, SAMPLE), INT32_MAX - 1]


_CHUNK_CALLS = """
#include <stdint.h>
{helpers}
void chunks_int32(int32_t extent, int32_t num_task, int32_t* out) {{
  for (int32_t t = 0; t < num_task; ++t) {{
    out[2 * t] = jitflow_chunk_begin_int32(extent, t, num_task);
    out[2 * t + 1] = jitflow_chunk_end_int32(extent, t, num_task);
  }}
}}
void chunks_int64(int64_t extent, int64_t num_task, int64_t* out) {{
  for (int64_t t = 0; t < num_task; ++t) {{
    out[2 * t] = jitflow_chunk_begin_int64(extent, t, num_task);
    out[2 * t + 1] = jitflow_chunk_end_int64(extent, t, num_task);
  }}
}}
"""


def test_chunks_cover_every_extent_of_the_loop_type_once(tmp_path, zig_cache):
    """The chunk helpers as libraries hold them, compiled by zig at -O2: for extents up to the
    largest of int32 and int64 and 1 to 64 tasks, the chunks run from 0 to the extent, in order,
    without gaps or overlaps, none larger than ceil(extent / tasks)."""
    import ctypes
    import platform
    import subprocess

    from jitflow.builder.host_c import parallel_c
    from jitflow.toolchain.zig_cc.zig import ZIG_TARGETS
    from jitflow.toolchain.zig_cc.zig_wheel import zig_binary

    source = tmp_path / "chunks.c"
    helpers = "\n".join(parallel_c.chunk_helpers(t) for t in ("int32_t", "int64_t"))
    source.write_text(_CHUNK_CALLS.format(helpers=helpers))
    target = ZIG_TARGETS[f"{platform.machine()}-linux-gnu"]           # the helpers need no libc
    subprocess.run([str(zig_binary()), "cc", "-target", target, "-shared", "-nostdlib", "-fPIC", "-O2", "-o",
                    str(tmp_path / "chunks.so"), str(source)],
                   check=True, env={**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(zig_cache),
                                    "ZIG_LOCAL_CACHE_DIR": str(tmp_path / "zig-local")})
    lib = ctypes.CDLL(str(tmp_path / "chunks.so"))
    for bits, largest, ctype in ((32, INT32_MAX, ctypes.c_int32), (64, INT64_MAX, ctypes.c_int64)):
        for extent in (0, 1, 5, 64, 1001, 2**31 - 7, INT32_MAX, largest - 6, largest - 1, largest):
            for num_task in (1, 2, 3, 7, 8, 64):
                out = (ctype * (2 * num_task))()
                getattr(lib, f"chunks_int{bits}")(ctype(extent), ctype(num_task), out)
                bounds = list(out)
                begins, ends = bounds[0::2], bounds[1::2]
                said = f"int{bits}: extent {extent}, {num_task} tasks: {list(zip(begins, ends))}"
                assert begins[0] == 0 and ends[-1] == extent, said
                assert all(b <= e and e - b <= -(-extent // num_task) for b, e in zip(begins, ends)), said
                assert begins[1:] == ends[:-1], said


_CLAIM_CALLS = """
#include <stdint.h>
{helpers}
/* tasks claim one piece at a time, in turn (greedy: task 0 claims all it can first, as a task
   whose chunk ends early does): each piece's begin, end and task go to out; returns their count */
#define CLAIMS(T)                                                                                  \\
int64_t claims_##T(T##_t extent, T##_t num_task, int32_t greedy, T##_t* out, int64_t capacity) {{ \\
  static struct jitflow_claim counts[{slots}];                                                    \\
  for (int i = 0; i < {slots}; ++i) counts[i].taken = 0;                                          \\
  struct jitflow_group group = {{counts, 0, 0, 0, 0}};                                            \\
  T##_t prev[{tasks}];                                                                            \\
  int64_t n = 0, open = num_task;                                                                 \\
  for (T##_t t = 0; t < num_task; ++t) prev[t] = -1;                                              \\
  while (open > 0 && n < capacity) {{                                                              \\
    for (T##_t t = 0; t < num_task; ++t) {{                                                        \\
      while (prev[t] != -2 && n < capacity) {{                                                     \\
        T##_t begin = jitflow_claim_##T(0, extent, t, num_task, &group, prev[t]);                 \\
        if (begin < 0) {{ prev[t] = -2; --open; break; }}                                          \\
        out[3 * n] = begin;                                                                       \\
        out[3 * n + 1] = jitflow_claim_end_##T(extent, begin, num_task);                          \\
        out[3 * n + 2] = t;                                                                       \\
        ++n;                                                                                      \\
        prev[t] = begin;                                                                          \\
        if (!(greedy && t == 0)) break;                                                           \\
      }}                                                                                           \\
    }}                                                                                             \\
  }}                                                                                               \\
  return n;                                                                                       \\
}}
CLAIMS(int32)
CLAIMS(int64)
"""


def test_claims_cover_every_extent_of_the_loop_type_once(tmp_path, zig_cache):
    """The claim helpers as libraries hold them, compiled by zig at -O2, tasks claiming in turn or one
    task first: for extents up to the largest of int32 and int64 and 1 to 65 tasks, the pieces cover
    0 to the extent once, without gaps or overlaps; each lies in one task's chunk (ceil(extent /
    tasks) iterations), in at most 8 pieces of it (the chunk whole past 64 tasks, where no claim
    counts are kept, and at one task); each chunk's last piece runs on its owner, and a task that is
    done first takes pieces of every other chunk."""
    import ctypes
    import platform
    import subprocess

    from jitflow.builder.host_c import parallel_c
    from jitflow.toolchain.zig_cc.zig import ZIG_TARGETS
    from jitflow.toolchain.zig_cc.zig_wheel import zig_binary

    tasks = 65
    source = tmp_path / "claims.c"
    group = parallel_c._GROUP.replace("extern int sched_yield(void);", "")
    helpers = "\n".join([group, *(parallel_c.claim_helpers(t) for t in ("int32_t", "int64_t"))])
    source.write_text(_CLAIM_CALLS.format(helpers=helpers, slots=parallel_c.CLAIM_SLOTS, tasks=tasks))
    target = ZIG_TARGETS[f"{platform.machine()}-linux-gnu"]           # the helpers need no libc
    subprocess.run([str(zig_binary()), "cc", "-target", target, "-shared", "-nostdlib", "-fPIC", "-O2", "-o",
                    str(tmp_path / "claims.so"), str(source)],
                   check=True, env={**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(zig_cache),
                                    "ZIG_LOCAL_CACHE_DIR": str(tmp_path / "zig-local")})
    lib = ctypes.CDLL(str(tmp_path / "claims.so"))
    capacity = tasks * parallel_c.CLAIM_PIECES + tasks
    for bits, largest, ctype in ((32, INT32_MAX, ctypes.c_int32), (64, INT64_MAX, ctypes.c_int64)):
        claims = getattr(lib, f"claims_int{bits}")
        claims.restype = ctypes.c_int64
        for extent in (0, 1, 5, 64, 1001, 2**31 - 7, INT32_MAX, largest - 6, largest - 1, largest):
            for num_task in (1, 2, 3, 7, 8, 64, 65):
                for greedy in (0, 1):
                    out = (ctype * (3 * capacity))()
                    count = claims(ctype(extent), ctype(num_task), greedy, out, ctypes.c_int64(capacity))
                    pieces = sorted(zip(out[0:3 * count:3], out[1:3 * count:3], out[2:3 * count:3]))
                    said = f"int{bits}: extent {extent}, {num_task} tasks, greedy {greedy}: {pieces[:12]}"
                    assert count < capacity, said
                    ends = [0] + [e for _, e, _ in pieces]
                    assert [b for b, _, _ in pieces] == ends[:-1] and ends[-1] == max(extent, 0), said
                    chunk = -(-extent // num_task)
                    whole = num_task == 1 or num_task > parallel_c.CLAIM_SLOTS
                    piece = chunk if whole else -(-chunk // parallel_c.CLAIM_PIECES)
                    assert all(b < e and e - b <= piece and b // chunk == (e - 1) // chunk
                               for b, e, _ in pieces), said
                    owners = {}
                    for b, e, t in pieces:
                        owners[b // chunk] = t                       # the chunk's last piece, last
                    assert all(owner == t for owner, t in owners.items()), said
                    if greedy and not whole and extent >= 2 * num_task * parallel_c.CLAIM_PIECES:
                        # task 0, done first, runs pieces of every other chunk that has several left
                        taken = {b // chunk for b, _, t in pieces if t == 0}
                        assert taken == set(range(-(-extent // chunk))), said
