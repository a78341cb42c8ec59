"""The C host builds what TVM's LLVM host builds: each construct TVM's C printer gets wrong, built by
jitflow on the "c" target and checked against numpy and against TVM's own LLVM build."""
from __future__ import annotations

import ctypes

import c_host_kernels as K
import numpy as np
import pytest
import tvm
from conftest import module_cache
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c import prelude as c_prelude
from jitflow.builder.host_c import source as host_c
from jitflow.errors import CompileError, HostCodeError
from jitflow.formats import elf


@pytest.fixture(scope="module")
def env(tmp_path_factory, zig_cache):
    """A private cache for this module's builds (each group is built once and shared by its cases)."""
    with module_cache(tmp_path_factory, zig_cache):
        yield


@pytest.fixture(scope="module")
def built(env):
    """group -> (jitflow's build on "c", TVM's build with its LLVM host)."""
    out = {}
    for group, cases in K.GROUPS.items():
        mod = K.module(cases, main=cases[0].name)
        exe = jitflow.compile(mod, "c")
        exe.jit()
        out[group] = (exe, tvm.compile(mod, "llvm"))
    return out


ALL = [(group, case) for group, cases in K.GROUPS.items() for case in cases]


@pytest.mark.parametrize("group, case", ALL, ids=[c.name for _, c in ALL])
def test_case_matches_numpy_and_tvm_llvm(built, group, case):
    exe, llvm = built[group]
    arrays = case.inputs(np.random.default_rng(7))
    K.check(case, arrays, K.call(exe[case.name], case, arrays))
    K.check(case, arrays, K.call(llvm[case.name], case, arrays))


def test_the_printer_fixes_are_in_the_ir_not_the_text(built):
    """The C text is TVM's printout of the legalized IR plus the prelude: no inf tokens, no C casts
    between vectors, helpers defined only where called."""
    sources = {g: (exe.build_info.library.parent / "src" / "host.c").read_text() for g, (exe, _) in built.items()}
    floats = sources["floats"].split(c_prelude.END_MARK)[1]
    assert "inff" not in floats and "nanf" not in floats
    assert "jitflow_f32_from_bits(-8388608)" in floats          # -inf, from its bits
    vectors = sources["vectors"]
    assert "__builtin_convertvector(v, float4)" in vectors        # int32x4 -> float32x4 converts each lane
    assert "jitflow_cvt_float32x4_int32x4(" in vectors.split(c_prelude.END_MARK)[1]
    assert "0x000000ff" not in vectors                           # no 8-bit lanes packed into an int
    assert "__builtin_convertvector" not in sources["packed"]    # helpers only where the module calls them
    for text in sources.values():
        assert text.count(c_prelude.MARK) == 1


def test_random_fill_through_a_packed_call(env):
    exe = jitflow.compile(K.module([K.RANDOM]), "c")
    llvm = tvm.compile(K.module([K.RANDOM]), "llvm")
    arrays = K.RANDOM.inputs(np.random.default_rng(0))
    assert K.uniform_ok(K.call(exe[K.RANDOM.name], K.RANDOM, arrays))
    assert K.uniform_ok(K.call(llvm[K.RANDOM.name], K.RANDOM, arrays))


def test_clz_of_zero_is_the_bit_width(built):
    exe, _ = built["intrinsics"]
    for name, dtype, bits in [("clz_popcount_i32", "int32", 32), ("clz_popcount_i64", "int64", 64)]:
        case = next(c for c in K.INTRINSICS if c.name == name)
        zeros, counts = K.call(exe[name], case, [np.zeros(K.N, dtype), np.zeros(K.N, "int32"), np.ones(K.N, dtype)])
        assert (zeros == bits).all() and (counts == 0).all()


SLOTS: list[tuple[int, int]] = []


@tvm.register_global_func("jitflow_tests.static_slot", override=True)
def _static_slot(handle, out):
    """Record (address, value) of a static handle's slot, then count up in it."""
    slot = ctypes.cast(handle, ctypes.POINTER(ctypes.c_int64))
    SLOTS.append((handle.value, slot[0]))
    slot[0] += 1


@T.prim_func
def two_static_handles(Out: T.Buffer((2,), "float32")):
    T.call_packed("jitflow_tests.static_slot", T.call_intrin("handle", "tirx.tvm_static_handle"), Out.data)
    T.call_packed("jitflow_tests.static_slot", T.call_intrin("handle", "tirx.tvm_static_handle"), Out.data)


@pytest.mark.parametrize("host", ["jitflow", "llvm"])
def test_static_handles_are_one_zeroed_slot_per_call_site(env, host):
    f = jitflow.compile(two_static_handles, "c") if host == "jitflow" else tvm.compile(two_static_handles, "llvm")
    SLOTS.clear()
    for _ in range(2):
        f(tvm.runtime.tensor(np.zeros(2, "float32")))
    (a, a0), (b, b0), (a2, a1), (b2, b1) = SLOTS
    assert a != b and (a, b) == (a2, b2)                 # two call sites, each the same slot every call
    assert (a0, b0, a1, b1) == (0, 0, 1, 1)              # zero at first, and it keeps what was written


# -- what cannot be built is named -----------------------------------------------------------------

@T.prim_func
def uses_vscale(B: T.Buffer((8,), "int32")):
    for i in range(8):
        B[i] = T.call_intrin("int32", "prim.vscale")


@T.prim_func
def plain(B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = T.float32(1)


@T.prim_func
def keyword_call(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = T.call_extern("float32", "int", A[i])


@T.prim_func
def reinterpret_lanes(A: T.Buffer((32,), "uint16"), B: T.Buffer((16,), "float32")):
    B[T.Ramp(0, 1, 16)] = T.reinterpret("float32x16", A[T.Ramp(0, 1, 32)])


def test_an_intrinsic_without_c_lowering_names_itself_and_its_function(env):
    with pytest.raises(HostCodeError) as err:
        jitflow.compile(tvm.IRModule({"uses_vscale": uses_vscale, "plain": plain}), "c").jit()
    assert err.value.functions == ["uses_vscale"] and "prim.vscale" in err.value.construct
    assert isinstance(err.value, CompileError) and err.value.command == "target.build.c"
    assert "in TIR function 'uses_vscale'" in str(err.value) and "Unresolved call" in err.value.log


def test_c_that_clang_rejects_names_the_line_and_function(env):
    with pytest.raises(HostCodeError) as err:
        jitflow.compile(tvm.IRModule({"keyword_call": keyword_call, "plain": plain}), "c").jit()
    assert err.value.functions == ["keyword_call"] and err.value.tool == "zig cc"
    assert "`B[i] = int(A[i]);`" in err.value.construct and err.value.source_path.name == "host.c"


def test_a_vector_the_pass_cannot_split_names_itself(env):
    with pytest.raises(HostCodeError) as err:
        jitflow.compile(reinterpret_lanes, "c").jit()
    assert err.value.functions == ["main"] and "tirx.reinterpret changing the lane count" in err.value.construct
    tvm.compile(reinterpret_lanes, "llvm")                   # LLVM's host builds it


def test_clang_log_lines_map_to_functions():
    text = host_c.host_source('#include <math.h>\nTVM_DLL int32_t f(void* a) {\n  x = 1;\n}\n')
    line = text.splitlines().index("  x = 1;") + 1
    log = f"src/host.c:{line}:3: error: use of undeclared identifier 'x'\n"
    mapped = host_c.explain(CompileError("zig cc", ["zig", "cc"], log, "src/host.c"), text)
    assert mapped.functions == ["f"] and "use of undeclared identifier 'x'" in mapped.construct
    in_prelude = host_c.explain(CompileError("zig cc", ["zig", "cc"], "src/host.c:3:1: error: boom\n"), text)
    assert "jitflow's C prelude" in in_prelude.construct
    other = CompileError("zig cc", ["zig", "cc"], "ld.lld: error: undefined symbol: g\n")
    assert host_c.explain(other, text) is other


# -- other hosts and targets -----------------------------------------------------------------------

def test_libraries_need_only_libc_libm_and_glibc_2_17(built):
    from portability import check_portable

    for exe, _ in built.values():
        check_portable(elf.read(exe.build_info.library), "x86_64")


def test_aarch64_build_is_portable_and_runs_under_qemu(env, tmp_path_factory, zig_cache):
    import arm_qemu
    from portability import check_portable

    folder = tmp_path_factory.mktemp("arm")
    cases = [c for g in ["vectors", "bfloat16", "intrinsics", "floats"] for c in K.GROUPS[g]]
    mod = K.module(cases, main=cases[0].name)
    library = jitflow.compile(mod, "c", host=arm_qemu.ARM).export_library(folder / "k.so")
    check_portable(elf.read(library), "aarch64")
    driver = arm_qemu.build_driver(folder, zig_cache)
    float32_only = ["fma_f32_x4", "fma_f32_x32", "select_f32_x8", "explicit_vectors", "infinities", "exp10_f32"]
    for case in [c for c in cases if c.name in float32_only]:
        arrays = case.inputs(np.random.default_rng(3))
        proc, after = arm_qemu.call(driver, library, arrays, folder, symbol=f"__tvm_ffi_{case.name}")
        assert proc.returncode == 0, proc.stderr
        K.check(case, arrays, after[-case.outputs:])


@T.prim_func
def scaled(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32"), s: T.float32, k: T.int32):
    # exp10, -inf and clz on the host: a check of the arguments and the grid's size. (A scalar let-bound
    # on the host and used in the kernel is not usable here: TVM 0.27 gives it a device workspace that
    # the host then writes, with its LLVM host as with C.)
    T.Assert(T.exp10(s) >= T.float32(1) and s > T.float32("-inf"), "exp10(s) < 1")
    for bx in T.thread_binding(T.clz(k) - 9, thread="blockIdx.x"):       # clz(1 << 20) - 9 = 2 blocks
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            B[bx * 128 + tx] = A[bx * 128 + tx] * T.float32(2)


@T.prim_func
def sorted_rows(A: T.Buffer((4, 16), "float32"), Order: T.Buffer((4, 16), "int32"), B: T.Buffer((64,), "float32")):
    T.evaluate(T.call_packed("tvm.contrib.thrust.argsort", A, Order, 1, True))    # from the host
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("float32", Order[tx // 16, tx % 16])


def test_cuda_host_code_with_these_constructs_builds(env, tmp_path):
    """The host side of a CUDA module: -inf, exp10 and clz on the host, a packed call with buffers."""
    from jitflow.formats import library_blob

    mod = tvm.IRModule({"scaled": scaled, "sorted_rows": sorted_rows})
    with pytest.raises(Exception, match="tirx.exp10"):        # TVM's own C host cannot print it
        tvm.compile(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host="c"))
    exe = jitflow.compile(mod, "cuda", arch="sm_90")
    blob = library_blob.parse(library_blob.blob_of(exe.export_library(tmp_path / "cuda_host.so")))
    (cuda,) = [library_blob.parse_cuda_payload(m.payload) for m in blob.modules if m.kind == "cuda"]
    assert cuda.fmt == "fatbin" and len(cuda.kernels) == 2
    host = (exe.build_info.library.parent / "src" / "host.c").read_text().split(c_prelude.END_MARK)[1]
    for call in ["jitflow_exp10f(s)", "jitflow_clz32(", "jitflow_f32_from_bits(-8388608)",
                 '"tvm.contrib.thrust.argsort"']:
        assert call in host
    assert exe.functions == ["scaled", "sorted_rows"]


@pytest.mark.gpu
@pytest.mark.skipif(tvm.base._RUNTIME_ONLY, reason="TVM without its compiler")
def test_cuda_host_constructs_compute_right_on_the_gpu(env):
    exe = jitflow.compile(tvm.IRModule({"scaled": scaled}), "cuda")      # the arch of the visible GPU
    a = np.random.default_rng(0).random(256, "float32")
    dev = tvm.cuda(0)

    def run(s: float, k: int) -> np.ndarray:
        b = tvm.runtime.tensor(np.zeros(256, "float32"), device=dev)
        exe["scaled"](tvm.runtime.tensor(a, device=dev), b, s, k)
        return b.numpy()

    np.testing.assert_array_equal(run(0.5, 1 << 20), a * 2)                    # two blocks: every element
    one_block = run(0.5, 1 << 21)                                               # clz = 10: one block
    np.testing.assert_array_equal(one_block[:128], a[:128] * 2)
    assert not one_block[128:].any()
    with pytest.raises(Exception, match=r"exp10\(s\) < 1"):                  # exp10(-1) = 0.1 on the host
        run(-1.0, 1 << 20)


@T.prim_func
def float_mod(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float64"), C: T.Buffer((16,), "float32"),
              D: T.Buffer((16,), "float64")):
    for i in range(16):
        C[i] = T.fmod(A[i], T.float32(0.75))
        D[i] = T.fmod(B[i], T.float64(0.75))


def test_fmod_matches_numpy(env):
    """TVM's LLVM host has no fmod either; the C host calls libm's."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(16).astype("float32") * 4, rng.standard_normal(16) * 4
    c, d = tvm.runtime.tensor(np.zeros(16, "float32")), tvm.runtime.tensor(np.zeros(16))
    jitflow.compile(float_mod, "c")(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c, d)
    np.testing.assert_array_equal(c.numpy(), np.fmod(a, np.float32(0.75)))
    np.testing.assert_array_equal(d.numpy(), np.fmod(b, 0.75))


@T.prim_func
def inexact_constant(B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = T.float32(0.1234567)


def test_only_functions_with_something_to_rewrite_are_rewritten():
    from jitflow.builder.host_c import legalize

    plain_module = tvm.IRModule({"plain": plain, "keyword_call": keyword_call})
    assert not any(legalize.needs_legalizing(f) for f in plain_module.functions.values())
    assert legalize.legalize_module(plain_module) is plain_module
    assert legalize.needs_legalizing(inexact_constant) and legalize.needs_legalizing(two_static_handles)
    assert legalize.needs_legalizing(reinterpret_lanes)                      # vectors
