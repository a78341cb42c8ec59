"""A CPU kernel library's entry functions (argument checks) call their work in compute functions
and are compiled once per machine and signature: libraries of different schedules share that
object, a library is byte for byte the same whether the object was compiled now or before (or
damaged and made again), the compute function is not exported, and the numbers are numpy's."""
from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest
import tvm
from conftest import module_cache
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c import split as split_c
from jitflow.formats import elf
from jitflow.toolchain.zig_cc import object_cache

import kernels

N = 37          # a size no other test builds: its entries' object is this module's own


def _schedule(tile: int):
    sch = tvm.s_tir.Schedule(kernels.matmul(N))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, tile])
    sch.reorder(io, k, ii, j)
    return sch.mod


@pytest.fixture(scope="module")
def env(tmp_path_factory, zig_cache):
    with module_cache(tmp_path_factory, zig_cache):
        yield zig_cache


def _host_c(exe) -> str:
    return (exe.build_info.library.parent / "src" / "host.c").read_text()


def _sha(exe) -> str:
    return hashlib.sha256(exe.build_info.library.read_bytes()).hexdigest()


def _object_folder(exe, zig_cache):
    entries, _ = split_c.split_entries(_host_c(exe))
    from jitflow.builder.steps import _include_dirs

    return zig_cache / object_cache.FOLDER / object_cache.recipe(entries, _include_dirs(), "x86_64-linux-gnu", None)


def test_schedules_share_their_entries_and_match_numpy(env):
    exes = [jitflow.compile(_schedule(tile), "c") for tile in (1, 4)]
    for exe in exes:
        exe.build()
    a, b = (np.random.default_rng(n).random((N, N), dtype="float32") for n in (1, 2))
    for exe in exes:
        c = tvm.runtime.tensor(np.zeros((N, N), "float32"))
        exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)
    texts = [_host_c(exe) for exe in exes]
    assert all("jitflow_compute_main(A, B, C)" in t
               and "int32_t jitflow_compute_main(float* A, float* B, float* C) {" in t for t in texts)
    entries = [split_c.split_entries(t)[0] for t in texts]
    assert entries[0] == entries[1] and "jitflow_compute_main(A, B, C)" in entries[0]
    assert split_c.split_entries(texts[0])[1] != split_c.split_entries(texts[1])[1]
    assert (_object_folder(exes[0], env) / object_cache.OBJECT).is_file()
    info = elf.read(exes[0].build_info.library)
    assert info.exported == ["__tvm_ffi__library_ctx", "__tvm_ffi_main"]      # not the compute function
    with pytest.raises(Exception, match="Mismatched"):                         # the checks still check
        exes[0]["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), tvm.runtime.tensor(np.zeros(N, "float32")))


def test_the_same_bytes_whether_the_entries_were_compiled_now_or_before(env):
    mod = _schedule(2)
    first = jitflow.compile(mod, "c", cache_salt="first")
    first.build()
    folder = _object_folder(first, env)
    shutil.rmtree(folder)                                   # compiled again for the next library
    again = jitflow.compile(mod, "c", cache_salt="again")
    again.build()
    assert folder.is_dir() and _sha(again) == _sha(first) and again.key != first.key
    damaged = folder / object_cache.OBJECT
    damaged.write_bytes(damaged.read_bytes()[:-8] + b"damaged!")    # made again, not linked
    third = jitflow.compile(mod, "c", cache_salt="third")
    third.build()
    assert _sha(third) == _sha(first) and not damaged.read_bytes().endswith(b"damaged!")


@T.prim_func(s_tir=True)
def scaled_add(a: T.handle, b: T.handle, c: T.handle, alpha: T.float32):
    n, m = T.int32(), T.int32()
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n, m), "float32", strides=(T.int32(), 1))
    C = T.match_buffer(c, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * alpha + B[vi, vj]


def test_a_body_gets_the_shapes_strides_and_scalars_its_entry_read(env):
    exe = jitflow.compile(scaled_add, "c")
    exe.build()
    assert "jitflow_compute_main(alpha, n, m, A, v, B, C)" in _host_c(exe)   # in the order the entry defines them
    rng = np.random.default_rng(3)
    for n, m, row in ((5, 7, 9), (3, 1, 4)):
        a = rng.random((n, m), dtype="float32")
        b = tvm.runtime.tensor(rng.random((n, row), dtype="float32")[:, :m].copy())
        c = tvm.runtime.tensor(np.zeros((n, m), "float32"))
        exe["main"](tvm.runtime.tensor(a), b, c, 1.5)
        np.testing.assert_allclose(c.numpy(), a * 1.5 + b.numpy(), rtol=1e-6)


def test_entries_that_use_the_files_state_stay_with_it():
    text = ("#include <stdint.h>\nstatic int32_t calls = 0;\n"
            '__attribute__((visibility("hidden"), noinline)) int32_t jitflow_compute_f(void);\n'
            "int32_t __tvm_ffi_f(void* s, void* a, int32_t n, void* r) { calls++; return jitflow_compute_f(); }\n"
            "int32_t jitflow_compute_f(void) { return 0; }\n")
    assert split_c.split_entries(text) is None
    shared = text.replace("calls++; ", "") + '__attribute__((visibility("hidden"))) int32_t jitflow_other(void);\n'
    entries, rest = split_c.split_entries(shared)
    assert "jitflow_other" not in entries and "jitflow_other(void);" in rest      # what the entries do not call
    assert "__tvm_ffi_f(void* s, void* a, int32_t n, void* r) {" in entries and "static int32_t calls" not in entries
    assert "int32_t jitflow_compute_f(void) { return 0; }" in rest and "return jitflow_compute_f(); }" not in rest
    assert "int32_t jitflow_compute_f(void);" in entries and "int32_t jitflow_compute_f(void);" in rest
    assert split_c.split_entries("int32_t __tvm_ffi_f(void) { return 0; }\n") is None   # nothing else to compile
