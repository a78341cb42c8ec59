"""Vectors of any lane count and float32 math at vector speed in the C host: results against numpy on
every CPU level this machine runs (and aarch64 under qemu), no access past a buffer's end, the
32-lane MetaSchedule candidate, and math accuracy and special values (a sample: the dense sweeps are
benchmarks/vector_math.py)."""
from __future__ import annotations

import ctypes
import mmap
import re

import numpy as np
import pytest
import tvm
from conftest import module_cache
from tvm import te
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c import mathlib
from jitflow.runtime import cpu_features
from jitflow.targets import cpu_level

#: lane counts of the T.vectorized loops: powers of two, odd ones, past C's 16, the 32 and 64 of MetaSchedule
WIDTHS = (2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 32, 48, 64)
ROWS = 16     # n = 16 * lanes floats: a multiple of 64 bytes, as DLPack wants a tensor aligned
#: x86 levels this CPU runs (v4 only where it has AVX-512)
LEVELS = [None] + [name for name in cpu_level.LEVELS[cpu_level.X86]
                   if set(cpu_level.LEVELS[cpu_level.X86][name][1]) <= set(cpu_features.this_cpu().features)]


def _widths_module() -> tvm.IRModule:
    """One function per width: B = A * 2 + 1 and C = exp(A) in a T.vectorized loop of that width."""
    funcs = {}
    for lanes in WIDTHS:
        n = ROWS * lanes
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i] * 2 + 1, name="B")
        C = te.compute((n,), lambda i: te.exp(A[i]) + te.sqrt(te.abs(A[i])), name="C")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
        for name in ("B", "C"):
            (i,) = sch.get_loops(sch.get_sblock(name))
            _, inner = sch.split(i, [None, lanes])
            sch.vectorize(inner)
        funcs[f"w{lanes}"] = sch.mod["main"].with_attr("global_symbol", f"w{lanes}")
    return tvm.IRModule(funcs)


@pytest.fixture(scope="module")
def env(tmp_path_factory, zig_cache):
    with module_cache(tmp_path_factory, zig_cache):
        yield


@pytest.fixture(scope="module")
def widths(env):
    """level -> the widths module built by jitflow for it."""
    mod = _widths_module()
    out = {}
    for level in LEVELS:
        exe = jitflow.compile(mod, "c", cpu_level=level)
        exe.jit()
        out[level] = exe
    return out


def _at_page_end(count: int) -> tuple[np.ndarray, mmap.mmap]:
    """A float32 array whose last element ends right before a page that may not be read or written."""
    page = mmap.PAGESIZE
    size = -(-count * 4 // page) * page
    mem = mmap.mmap(-1, size + page)
    libc = ctypes.CDLL(None, use_errno=True)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    assert libc.mprotect(ctypes.c_void_p(base + size), ctypes.c_size_t(page), 0) == 0
    return np.frombuffer(mem, np.float32, count, offset=size - count * 4), mem


@pytest.mark.parametrize("level", LEVELS, ids=lambda v: v or "baseline")
@pytest.mark.parametrize("lanes", WIDTHS)
def test_vector_widths_match_numpy_and_stay_inside_buffers(widths, level, lanes):
    """Each width at each level computes what numpy does, with every buffer ending at a page that
    faults when touched: a 3-lane vector read or written as 4 lanes would crash the test."""
    n = ROWS * lanes
    a = np.random.default_rng(lanes).uniform(-4, 4, n).astype("float32")
    arrays = [_at_page_end(n) for _ in range(3)]
    (ga, _), (gb, _), (gc, _) = arrays
    ga[:] = a
    args = [tvm.runtime.from_dlpack(x) for x, _ in arrays]
    widths[level][f"w{lanes}"](*args)
    np.testing.assert_allclose(gb, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(gc, np.exp(a) + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-5)


def test_wide_vectors_are_cut_into_c_vectors_not_lanes(widths):
    """A 32-lane statement is two 16-lane vector statements (and its exp two vector calls), not 32 scalars."""
    source = (widths[None].build_info.library.parent / "src" / "host.c").read_text()
    assert "float16 B_piece16 = " in source
    assert "jitflow_expf_x16(" in source and "B_lane31" not in source
    assert "jitflow_expf_x5(" in source                       # odd widths are vectors too
    assert not re.search(r"\bfloat3\b", source)                  # 3 lanes: scalars


@T.prim_func(s_tir=True)
def matmul_32_lanes(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                    C: T.Buffer((128, 128), "float32")):
    # one of MetaSchedule's candidates for a 128^3 matmul on an llvm target: a 32-lane accumulator
    T.func_attr({"tirx.noalias": True})
    C_global = T.sblock_alloc_buffer((128, 128))
    for f in T.parallel(8):
        for i_2_init, i_3_init in T.grid(4, 16):
            for j_init in T.vectorized(32):
                with T.sblock("C_init"):
                    vi = T.axis.spatial(128, f % 4 // 2 * 64 + i_2_init * 16 + i_3_init)
                    vj = T.axis.spatial(128, f // 4 * 64 + f % 2 * 32 + j_init)
                    C_global[vi, vj] = T.float32(0.0)
        for k_0, i_2, k_1, i_3 in T.grid(4, 4, 32, 16):
            for j in T.vectorized(32):
                with T.sblock("C_update"):
                    vi = T.axis.spatial(128, f % 4 // 2 * 64 + i_2 * 16 + i_3)
                    vj = T.axis.spatial(128, f // 4 * 64 + f % 2 * 32 + j)
                    vk = T.axis.reduce(128, k_0 * 32 + k_1)
                    C_global[vi, vj] = C_global[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0 in range(64):
            for ax1 in T.vectorized(32):
                with T.sblock("C_global"):
                    v0 = T.axis.spatial(128, f % 4 // 2 * 64 + ax0)
                    v1 = T.axis.spatial(128, f // 4 * 64 + f % 2 * 32 + ax1)
                    C[v0, v1] = C_global[v0, v1]


def test_metaschedule_32_lane_candidate_builds_and_matches_numpy(env):
    """TVM keeps the accumulator as a buffer of float32x32 elements; the C host used to fail on it
    (`index_lanes * buffer_lanes == value_dtype_lanes (32 vs. 1)`)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype("float32") for _ in range(2))
    c = tvm.runtime.tensor(np.zeros((128, 128), "float32"))
    exe = jitflow.compile(matmul_32_lanes, "c")
    exe(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    # its loads are vector loads, not the gathers TVM prints for a base it cannot prove aligned
    code = (exe.build_info.library.parent / "src" / "host.c").read_text().split("/* end of jitflow C prelude */")[1]
    assert "jitflow_vload_float16(" in code and not re.search(r"float16\(\w+\[v_", code)


def test_widths_run_on_aarch64_under_qemu(env, tmp_path_factory, zig_cache):
    import arm_qemu

    folder = tmp_path_factory.mktemp("arm_widths")
    library = jitflow.compile(_widths_module(), "c", host=arm_qemu.ARM).export_library(folder / "w.so")
    driver = arm_qemu.build_driver(folder, zig_cache)
    for lanes in WIDTHS:
        n = ROWS * lanes
        a = np.random.default_rng(lanes).uniform(-4, 4, n).astype("float32")
        proc, (_, b, c) = arm_qemu.call(driver, library, [a, np.zeros(n, "float32"), np.zeros(n, "float32")],
                                        folder, symbol=f"__tvm_ffi_w{lanes}")
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(c, np.exp(a) + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-5)


# -- math -------------------------------------------------------------------------------------------

UNARY = {"exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "log": np.log, "log2": np.log2,
         "log10": np.log10, "log1p": np.log1p, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
         "erf": None, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "sin": np.sin, "cos": np.cos, "tan": np.tan,
         "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "asinh": np.arcsinh, "acosh": np.arccosh,
         "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint,
         "sqrt": np.sqrt}
BINARY = {"pow": np.power, "atan2": np.arctan2, "hypot": np.hypot, "nextafter": np.nextafter}
#: inputs per function: where it is defined, and past where it overflows, underflows or saturates
DOMAIN = {"log": (1e-30, 1e30), "log2": (1e-30, 1e30), "log10": (1e-30, 1e30), "log1p": (-0.999, 50),
          "asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.999, 0.999), "acosh": (1, 1e4), "sqrt": (0, 1e6),
          "exp": (-105, 90), "exp2": (-150, 130), "exp10": (-46, 39), "sinh": (-90, 90), "cosh": (-90, 90)}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45, 1e-40, 3.4e38, -3.4e38,
                     0.5, -0.5, 2.5, -2.5, 88.73, 88.72, -103.98, -87.34, 1e30, -1e30, 1e6, -3e5], "float32")
N = 4096


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)


def _math_module(vector: bool) -> tvm.IRModule:
    """One function per intrinsic on N floats (B = f(A), or f(A, B2)), its loop vectorized by 8 or serial."""
    funcs = {}
    for name in [*UNARY, *BINARY]:
        A = te.placeholder((N,), "float32", name="A")
        A2 = te.placeholder((N,), "float32", name="A2")
        out = te.compute((N,), _body(getattr(tvm.tirx, name), A, A2, name in BINARY), name="B")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, A2, out]))
        if vector:
            (i,) = sch.get_loops(sch.get_sblock("B"))
            _, inner = sch.split(i, [None, 8])
            sch.vectorize(inner)
        funcs[name] = sch.mod["main"].with_attr("global_symbol", name)
    return tvm.IRModule(funcs)


def _body(fn, A, A2, binary: bool):
    if binary:
        return lambda i: fn(A[i], A2[i])
    return lambda i: fn(A[i])


@pytest.fixture(scope="module")
def math_builds(env):
    """(level, vectorized) -> jitflow's build of the math module."""
    out = {}
    for level in [None, *(["x86-64-v3"] if "x86-64-v3" in LEVELS else [])]:
        for vector in (True, False):
            exe = jitflow.compile(_math_module(vector), "c", cpu_level=level)
            exe.jit()
            out[level, vector] = exe
    return out


def _inputs(name: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(len(name))
    lo, hi = DOMAIN.get(name, (-10, 10))
    a = rng.uniform(lo, hi, N)
    if name in ("log", "log2", "log10"):
        a = np.exp(rng.uniform(np.log(lo), np.log(hi), N))
    b = rng.uniform(-10, 10, N)
    if name == "pow":
        a, b = rng.uniform(0, 8, N), rng.uniform(-12, 12, N)
    k = len(SPECIALS)
    a[:k * k], b[:k * k] = np.repeat(SPECIALS, k), np.tile(SPECIALS, k)      # every pair of special values
    if name not in BINARY:
        a[:k], b[:k] = SPECIALS, 0
    return a.astype("float32"), b.astype("float32")


def _libm(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What the C library gives (float32 libm through ctypes): the special values to match exactly."""
    libm = ctypes.CDLL("libm.so.6")
    cname = {"round": "nearbyintf", "sigmoid": None}.get(name, name + "f")
    if cname is None:
        with np.errstate(all="ignore"):
            return (1 / (1 + np.exp(-a.astype(np.float64)))).astype("float32")
    f = getattr(libm, cname)
    f.restype = ctypes.c_float
    f.argtypes = [ctypes.c_float] * (2 if name in BINARY else 1)
    return np.array([f(x, y) if name in BINARY else f(x) for x, y in zip(a, b)], "float32")


@pytest.mark.parametrize("vector", [True, False], ids=["vectorized", "serial"])
@pytest.mark.parametrize("level", [None, "x86-64-v3"], ids=["baseline", "x86-64-v3"])
@pytest.mark.parametrize("name", [*UNARY, *BINARY])
def test_math_matches_numpy_and_libm_special_values(math_builds, level, vector, name):
    """At TVM's own tolerance (rtol = atol = 1e-5, tests/python/tirx-base/test_tir_intrin.py) against
    numpy in float64, and every special value (zeros, infinities, nan, denormals, overflow, underflow)
    exactly as libm gives it, sign of zero included."""
    if (level, vector) not in math_builds:
        pytest.skip(f"this CPU does not run {level}")
    a, b = _inputs(name)
    out = tvm.runtime.tensor(np.zeros(N, "float32"))
    math_builds[level, vector][name](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    got = out.numpy()
    reference = UNARY.get(name) or BINARY.get(name)
    with np.errstate(all="ignore"):
        if name == "erf":
            want = _erf(a)
        elif name == "nextafter":
            want = np.nextafter(a, b)
        else:
            want = reference(*((a.astype(np.float64), b.astype(np.float64)) if name in BINARY
                               else (a.astype(np.float64),)))
    k = len(SPECIALS) ** 2 if name in BINARY else len(SPECIALS)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got[k:], np.asarray(want, np.float64)[k:].astype("float32"), rtol=1e-5, atol=1e-5)
    libm = _libm(name, a[:k], b[:k])
    special = np.isnan(libm) | np.isinf(libm) | (libm == 0) | ~np.isfinite(a[:k]) | ~np.isfinite(b[:k]) \
        | (np.abs(a[:k]) < 1e-37)
    same = (got[:k] == libm) & (np.signbit(got[:k]) == np.signbit(libm)) | (np.isnan(got[:k]) & np.isnan(libm))
    bad = np.where(special & ~same)[0]
    assert not len(bad), [(float(a[i]), float(b[i]), float(got[i]), float(libm[i])) for i in bad[:5]]


def test_math_is_written_only_where_used_and_vector_statements_stay_vectors(math_builds):
    """The prelude holds the functions a module calls and no others; a vectorized exp is one call of
    the vector form, not eight libm calls."""
    source = (math_builds[None, True].build_info.library.parent / "src" / "host.c").read_text()
    prelude, code = source.split("/* end of jitflow C prelude */")
    assert "jitflow_expf_x8(" in code and "expf(" not in code.replace("jitflow_expf_x8(", "")
    assert "jitflow_erff(" in code                       # TVM leaves erf's loop serial: the scalar form
    small = mathlib.definitions("jitflow_expf_x4(x)")
    assert "jitflow_kexp_x4" in small and "klog" not in small and "jitflow_expf(" not in small


# -- what the baseline costs, said where it costs ---------------------------------------------------

def test_a_baseline_build_with_vector_code_says_what_this_cpu_could_run(env, monkeypatch):
    """The build report of a library with vector code built for the baseline on a CPU that runs more
    names the level and cpu_level='native'; a build without vectors, or at a level, says nothing."""
    from jitflow.targets import hosts

    v3 = cpu_level.LEVELS[cpu_level.X86]["x86-64-v3"][1]
    monkeypatch.setattr(hosts, "machine_host", lambda: cpu_level.X86)
    with cpu_features.simulated(v3, "a v3 CPU"):
        vector = jitflow.compile(_widths_module()["w8"], "c", cache=False)
        vector.build()
        plain = jitflow.compile(matmul_32_lanes.with_attr("global_symbol", "main"), "c", cache=False,
                                pass_config={"tirx.disable_vectorize": True})
        plain.build()
        chosen = jitflow.compile(_widths_module()["w8"], "c", cache=False, cpu_level="x86-64-v2")
        chosen.build()
    assert "note: vector code and math built for the baseline use SSE2" in str(vector.build_info)
    assert "this CPU runs x86-64-v3: cpu_level='native'" in str(vector.build_info)
    assert plain.build_info.note is None and chosen.build_info.note is None


def test_vector_math_libraries_need_only_libc_and_libm_at_glibc_2_17(math_builds, tmp_path):
    """No libmvec, nothing newer than glibc 2.17: the math is inline C."""
    from portability import PORTABLE_NEEDED

    from jitflow.formats import elf

    for exe in math_builds.values():
        info = elf.read(exe.build_info.library)
        assert set(info.needed) <= PORTABLE_NEEDED and not any("mvec" in n for n in info.needed), info.needed
        assert info.glibc_baseline is None or tuple(map(int, info.glibc_baseline.split("."))) <= (2, 17)
        assert "__tvm_ffi_exp" in info.exported and "__tvm_ffi_erf" in info.exported


def test_native_builds_for_this_cpu_and_runs_in_jit(env):
    """cpu_level='native' is this machine's level, for local jit() use: it builds, loads and computes."""
    exe = jitflow.compile(_widths_module()["w32"], "c", cpu_level="native")
    n = ROWS * 32
    a = np.random.default_rng(1).uniform(-4, 4, n).astype("float32")
    b, c = (tvm.runtime.tensor(np.zeros(n, "float32")) for _ in range(2))
    exe(tvm.runtime.tensor(a), b, c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-5)
    assert exe.options.cpu_level.name == "native" and exe.build_info.note is None


def test_the_prelude_holds_only_what_the_source_uses():
    """The prelude is compiled for every build: a kernel without vectors or math gets a few lines; one
    vectorized exp gets its types and exp's kernel, not log's."""
    from jitflow.builder.host_c import prelude

    plain = prelude.prelude_for("int32_t f(int32_t x) { return x; }")
    assert len(plain) < 1200 and "ext_vector_type" not in plain
    exp8 = prelude.prelude_for("float8 y = jitflow_expf_x8(x);")
    assert {"float8", "double8", "int64_t8"} <= set(re.findall(r"typedef \w+ (\w+) ", exp8))
    assert "jitflow_kexp_x8" in exp8 and "jitflow_klog" not in exp8 and "float4" not in exp8
    assert len(exp8) < 3000


def test_math_libraries_are_byte_identical_when_rebuilt(tmp_path, zig_cache):
    """Two builds of the math module in two empty caches give the same bytes."""
    mod = _math_module(True)
    libraries = []
    for name in ("a", "b"):
        exe = jitflow.compile(mod, "c", cache_dir=tmp_path / name)
        exe.build()
        libraries.append(exe.build_info.library.read_bytes())
    assert libraries[0] == libraries[1]
