"""Host functions compute in a function of their own, as TVM's LLVM host compiles them; its buffers
are restrict parameters exactly where the TIR function promises that they do not alias
(tirx.noalias). Each result is checked against numpy."""
from __future__ import annotations

import kernels
import numpy as np
import pytest
import tvm
from conftest import module_cache
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import jitflow
from jitflow.builder.host_c import outline, outline_c
from jitflow.errors import HostCodeError
from jitflow.formats import elf

N = 32


def _promising(mod):
    return tvm.IRModule({"main": mod["main"].with_attr("tirx.noalias", True)})


@T.prim_func
def _checked(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    """C = A * 2, after checking (in the computing part, at run time) that A[0] is positive."""
    T.func_attr({"tirx.noalias": True})
    assert A[0] > T.float32(0), "the first value must be positive"
    for i in range(N):
        C[i] = A[i] * T.float32(2)


def _symbolic_chain():
    """B = A * 2, then D = B + 1, over a symbolic length: B is a workspace of n floats."""
    @T.prim_func
    def main(a: T.handle, d: T.handle):
        T.func_attr({"tirx.noalias": True})
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        D = T.match_buffer(d, (n,), "float32")
        B = T.decl_buffer((n,), "float32")
        for i in range(n):
            B[i] = A[i] * T.float32(2)
        for i in range(n):
            D[i] = B[i] + T.float32(1)

    return tvm.IRModule({"main": main})


@I.ir_module
class _Views:
    """x + reshape(reshape(x)): the add gets x twice, once as a view of the same memory (the VM
    reshapes without copying)."""

    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            flat = R.reshape(x, (32,))
            back = R.reshape(flat, (4, 8))
            out = R.add(x, back)
            R.output(out)
        return out


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """Each module built once on "c": name -> (executable, its host C)."""
    modules = {"matmul": _promising(kernels.matmul(N)), "plain": kernels.matmul(N), "checked": _checked,
               "workspace": _symbolic_chain(), "views": _Views}
    out = {}
    with module_cache(tmp_path_factory, zig_cache, "noalias-cache"):
        for name, mod in modules.items():
            exe = jitflow.compile(mod, "c")
            exe.build()
            out[name] = (exe, (exe.build_info.library.parent / "src" / "host.c").read_text())
        yield out


def test_a_promising_function_computes_with_restrict_buffers(built):
    exe, host_c = built["matmul"]
    a, b = (np.random.default_rng(n).random((N, N), "float32") for n in (0, 1))
    c = np.zeros((N, N), "float32")
    exe["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    lines = host_c.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("int32_t jitflow_compute_main("))
    assert lines[header] == ("int32_t jitflow_compute_main(float* restrict A, float* restrict B, "
                             "float* restrict C) {")
    entry = next(n for n, line in enumerate(lines) if line.startswith("TVM_DLL int32_t __tvm_ffi_main("))
    end = lines.index("}", entry)
    assert entry < header and "jitflow_compute_main(A, B, C)" in "\n".join(lines[entry:end])
    assert not any("{" in line for line in lines[end + 1:header])      # it follows its entry
    assert '__attribute__((visibility("hidden"), noinline)) int32_t jitflow_compute_main(' in host_c


def test_a_function_without_the_promise_computes_without_restrict(built):
    exe, host_c = built["plain"]
    assert "int32_t jitflow_compute_main(float* A, float* B, float* C) {" in host_c
    assert "restrict" not in host_c.split("prelude */")[-1]
    a, b = (np.random.default_rng(n).random((N, N), "float32") for n in (3, 4))
    c = np.zeros((N, N), "float32")
    exe["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_the_compute_part_is_not_exported(built):
    exe, _ = built["matmul"]
    exported = elf.read(exe.build_info.library).exported
    assert "__tvm_ffi_main" in exported and not [s for s in exported if "jitflow_compute" in s]


def test_an_error_in_the_compute_part_reaches_the_caller(built):
    exe, host_c = built["checked"]
    assert "jitflow_compute_main(" in host_c
    a, c = np.full(N, 3, "float32"), np.zeros(N, "float32")
    exe["main"](a, c)
    np.testing.assert_array_equal(c, a * 2)
    a[0] = -1
    with pytest.raises(Exception, match="the first value must be positive"):
        exe["main"](a, c)


def test_a_workspace_in_the_compute_part_belongs_to_its_function(built):
    exe, host_c = built["workspace"]
    a, d = np.arange(50, dtype="float32"), np.zeros(50, "float32")
    exe["main"](a, d)
    np.testing.assert_array_equal(d, a * 2 + 1)
    rep = exe.inspect()
    (alloc,) = rep.allocations
    (main,) = [f for f in rep.functions if f.name == "main"]
    assert alloc.function == "main" and main.line < alloc.line < alloc.freed_line <= main.end_line
    assert "TVMBackendAllocWorkspace" in rep.host_line(alloc.line)
    assert host_c.splitlines()[alloc.line - 1].startswith("  ") and "jitflow_compute_main(" in host_c
    assert rep.evaluate(n=50).allocations[0].bytes == 50 * 4          # n is main's, passed to the compute part


def test_views_of_one_tensor_in_one_call(built):
    exe, host_c = built["views"]
    assert "float* restrict" in host_c
    x = np.random.default_rng(2).random((4, 8), "float32")
    np.testing.assert_allclose(exe.vm("cpu")["main"](x).numpy(), x + x)


def test_c_names_of_the_compute_parts_are_reserved():
    """A TIR function printed as jitflow_compute_... (no global symbol: the module's name is its C name)."""
    helper = kernels.vecadd(N)["main"].without_attr("global_symbol")
    mod = tvm.IRModule({"main": kernels.vecadd(N)["main"], "jitflow_compute_main": helper})
    with pytest.raises(HostCodeError, match="jitflow_compute_") as raised:
        outline.outline_module(mod, every_function=True)
    assert raised.value.functions == ["jitflow_compute_main"]


def test_the_text_pass_leaves_other_c_alone():
    text = "TVM_DLL int32_t __tvm_ffi_f(void* self_handle, void* args, int32_t num_args, void* result) {\n}\n"
    assert outline_c.place_compute(text, {"jitflow_compute_f"}) is text


def test_restrict_exactly_where_promised_and_cuda_hosts_keep_their_code():
    """A Relax model on "c": every function that works on the CPU is outlined, its legalized
    operators (which promise) with restrict buffers, its shape function (which does not) without.
    On "cuda" nothing is: the host side launches kernels, and the shape function keeps its code."""
    import models

    from jitflow.builder import lower
    from jitflow.targets.spec import resolve_target

    cpu = lower.lower(models.symbolic_mlp(), resolve_target("c")).host_c.splitlines()
    heads = {line.split("(")[0][len("int32_t "):]: line for line in cpu if line.startswith("int32_t jitflow_compute_")}
    assert {"jitflow_compute_matmul", "jitflow_compute_relu", "jitflow_compute_shape_func"} <= set(heads)
    assert heads["jitflow_compute_shape_func"] == "int32_t jitflow_compute_shape_func(int64_t* H) {"
    assert all("float* restrict" in line for name, line in heads.items() if name != "jitflow_compute_shape_func")
    cuda = resolve_target("cuda", arch=["sm_90"])
    promising = tvm.IRModule({"main": kernels.vecadd_cuda(256)["main"].with_attr("tirx.noalias", True)})
    for mod in (promising, models.symbolic_mlp()):
        host_c = lower.lower(mod, cuda).host_c
        assert "TVMFFIFunctionCall" in host_c and "jitflow_compute_" not in host_c
