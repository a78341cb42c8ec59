"""Splitting C into pieces that compile apart: the pieces link into a library that behaves as the
whole file does; what must stay together stays together; what cannot be split is not."""
from __future__ import annotations

import ctypes
import re
import threading

import pytest

from jitflow.builder.host_c import split as split_c
from jitflow.builder.host_c.compile import HostCompile
from jitflow.toolchain.zig_cc import link, zig

HOST = "x86_64-linux-gnu"

#: C with every kind of top-level item TVM's host code has, and a few it might
SOURCE = r"""// a comment with a brace {
#define TVM_EXPORTS
#include <math.h>
#include <stddef.h>
#define TWICE(x) \
    ((x) * 2)
typedef struct { int a; int b; } pair_t;
int counter_base = 10;
static int shared_state = 0;
static void* lookup_packed = NULL;
static const char* banner = "not a brace: } {";
static int calls = 0;
static int count_call(void) { return ++calls; }
#ifdef __cplusplus
extern "C"
#endif
int first(int x);
static int helper(int x) { return x + 1; }
#ifdef __cplusplus
extern "C"
#endif
int first(int x) { shared_state += x; return helper(x) + counter_base; }
#ifdef __cplusplus
extern "C"
#endif
int second(int x) { return shared_state + TWICE(x); }
int third(int x) { if (lookup_packed == NULL) { lookup_packed = (void*)banner; } return (int)banner[13] + x; }
int fourth(int x) { pair_t p = {x, 2 * x}; const char* s = "}}}"; return p.a + p.b + (int)s[0]; }
int fifth(int x) { return (int)sqrt((double)(x * x)) + count_call(); }
int sixth(int x) { if (lookup_packed == NULL) { lookup_packed = &counter_base; } return x - count_call(); }
"""
FUNCTIONS = ["first", "second", "third", "fourth", "fifth", "sixth"]


def _calls(library):
    lib = ctypes.CDLL(str(library))
    return [getattr(lib, f)(n + 3) for n, f in enumerate(FUNCTIONS)]


def _build(folder, texts, zig_cache):
    folder.mkdir()
    objects = []
    for n, text in enumerate(texts):
        (folder / f"p{n}.c").write_text(text)
        zig.compile_object(folder / f"p{n}.c", folder / f"p{n}.o", [], HOST, zig_cache, folder).wait()
        objects.append(folder / f"p{n}.o")
    link.link_shared(objects, folder / "lib.so", HOST, zig_cache, folder)
    return folder / "lib.so"


def test_scanning_keeps_every_byte():
    items = split_c.scan(SOURCE)
    assert "".join(i.text for i in items) == SOURCE
    functions = [i.name for i in items if i.kind == "function"]
    assert functions == ["count_call", "helper", "first", "second", "third", "fourth", "fifth", "sixth"]


def test_pieces_link_into_the_same_library(tmp_path, zig_cache):
    whole = _build(tmp_path / "whole", [SOURCE], zig_cache)
    pieces = split_c.split(SOURCE, 3)
    assert len(pieces) == 3
    assert _calls(_build(tmp_path / "split", pieces, zig_cache)) == _calls(whole)
    # functions that share a static variable are in one piece, also through a helper that uses it;
    # a helper that uses no static variable is in every piece
    (together,) = [p for p in pieces if "int first(int x) {" in p]
    assert "int second(int x) {" in together
    (counted,) = [p for p in pieces if "int fifth(int x) {" in p]
    assert "int sixth(int x) {" in counted and "static int count_call(void) {" in counted
    assert all("static int helper(int x) {" in p for p in pieces)
    # the global is defined once, declared elsewhere; the handle cache is every piece's own
    assert sum("int counter_base = 10;" in p for p in pieces) == 1
    assert all("static void* lookup_packed = NULL;" in p for p in pieces)


def test_what_cannot_be_split_is_one_piece():
    assert split_c.split(SOURCE, 1) == [SOURCE]
    unbalanced = SOURCE + "int broken(void) { return 1;\n"
    assert split_c.split(unbalanced, 4) == [unbalanced]
    one_unit = "static int s;\nint a(void) { return s; }\nint b(void) { return s + 1; }\n"
    assert split_c.split(one_unit, 4) == [one_unit]


def test_host_compile_falls_back_to_the_whole_file(tmp_path, zig_cache):
    # two variables in one definition: the splitter declares only the last one in other pieces, so
    # the pieces do not compile; the whole file does, and is what gets built
    text = "int x = 40, y = 2;\n" + "".join(f"int f{n}(void) {{ return x + y + {n}; }}\n" for n in range(6))
    source = tmp_path / "host.c"
    source.write_text(text)
    assert len(split_c.split(text, 3)) == 3
    compile_ = HostCompile(source, text, tmp_path, [], HOST, zig_cache, tmp_path / "zig-local", pieces=3)
    objects = compile_.wait()
    assert len(compile_.pieces) > 1           # it was split, and the pieces failed
    assert [o.name for o in objects] == ["host.o"]
    link.link_shared(objects, tmp_path / "lib.so", HOST, zig_cache, tmp_path)
    assert ctypes.CDLL(str(tmp_path / "lib.so")).f5() == 47



def test_the_callers_thread_leaves_the_source_to_the_compile(tmp_path, zig_cache, monkeypatch):
    # a build does Python work of its own (the memory record) while the host C compiles: measuring the
    # source's functions for their flags on the caller's thread held the interpreter from the split,
    # and so delayed the compilers' start; it happens beside the caller, and started() waits for it
    from jitflow.builder.host_c import compile as host_compile

    measured_on = []
    chosen = host_compile.flags_for
    monkeypatch.setattr(host_compile, "flags_for",
                        lambda text: measured_on.append(threading.current_thread()) or chosen(text))
    text = "".join(f"int f{n}(int x) {{ return x + {n}; }}\n" for n in range(6))
    source = tmp_path / "host.c"
    source.write_text(text)
    compile_ = HostCompile(source, text, tmp_path, [], HOST, zig_cache, tmp_path / "zig-local", pieces=2)
    compile_.started()
    assert len(compile_.pieces) == 2 and len(measured_on) == 2      # each piece's, not the whole file's
    assert threading.current_thread() not in measured_on
    objects = compile_.wait()
    link.link_shared(objects, tmp_path / "lib.so", HOST, zig_cache, tmp_path)
    assert ctypes.CDLL(str(tmp_path / "lib.so")).f5(37) == 42


def test_started_waits_for_the_compilers_to_start(tmp_path, zig_cache, monkeypatch):
    # the caller's Python work after started() (the memory record) would hold the interpreter from a
    # compile thread still starting its zig process: started() returns once every piece's is running
    import time

    from jitflow.builder.host_c import compile as host_compile

    started = []
    start = host_compile.zig.compile_object

    def slow_start(source, *args, **kwargs):
        time.sleep(0.3)                   # the compile thread is slow to start its process
        job = start(source, *args, **kwargs)
        started.append(source.name)
        return job

    monkeypatch.setattr(host_compile.zig, "compile_object", slow_start)
    text = "".join(f"int f{n}(int x) {{ return x + {n}; }}\n" for n in range(6))
    source = tmp_path / "host.c"
    source.write_text(text)
    compile_ = HostCompile(source, text, tmp_path, [], HOST, zig_cache, tmp_path / "zig-local", pieces=2)
    compile_.started()
    assert sorted(started) == ["host_0.c", "host_1.c"]
    objects = compile_.wait()
    link.link_shared(objects, tmp_path / "lib.so", HOST, zig_cache, tmp_path)
    assert ctypes.CDLL(str(tmp_path / "lib.so")).f5(37) == 42

CUDA = r"""#include <cuda/std/cstdint>
namespace helpers { __device__ inline float twice(float x) { return 2.0f * x; } }
extern "C" __global__ void __launch_bounds__(128) scale_kernel(float* __restrict__ a);
extern "C" __global__ void __launch_bounds__(128) scale_kernel(float* __restrict__ a) {
  a[threadIdx.x] = helpers::twice(a[threadIdx.x]);
}
extern "C" __global__ void __launch_bounds__(64) add_kernel(float* __restrict__ a, float* __restrict__ b) {
  a[threadIdx.x] += b[threadIdx.x];
}
extern "C" __global__ void __launch_bounds__(32) copy_kernel(float* __restrict__ a, float* __restrict__ b) {
  b[threadIdx.x] = a[threadIdx.x];
}
"""


def test_cuda_splits_by_kernel_with_the_prelude_in_every_piece():
    pieces = split_c.split_kernels(CUDA, 2)
    assert sorted(n for _, names in pieces for n in names) == ["add_kernel", "copy_kernel", "scale_kernel"]
    for text, names in pieces:
        assert "namespace helpers" in text and "#include <cuda/std/cstdint>" in text
        defined = {k for k in ("scale_kernel", "add_kernel", "copy_kernel") if re.search(rf"{k}\([^;{{]*\)\s*{{", text)}
        assert defined == set(names)
    assert split_c.split_kernels(CUDA, 1) == [(CUDA, [])]


@pytest.mark.parametrize("state", ["__device__ int visits = 0;\n", "static __device__ int visits;\n"])
def test_cuda_with_state_at_file_scope_is_not_split(state):
    assert split_c.split_kernels(state + CUDA, 4) == [(state + CUDA, [])]
