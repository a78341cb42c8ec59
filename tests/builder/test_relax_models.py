"""Relax models through jitflow: VM numbers against numpy, export + load_vm, cache, key, CUDA bytes."""
from __future__ import annotations

import os
from pathlib import Path

import models
import numpy as np
import pytest
from conftest import ROOT, run_python

import jitflow
from jitflow.cache.key import key as keys
from jitflow.errors import InvalidInputError, LibraryFormatError
from jitflow.formats import fatbin, library_blob
from jitflow.formats import vm_program as vm_format
from jitflow.report import storage_plan

RUNS_IN_RUNTIME_ONLY_TVM = True   # collected in a TVM without its compiler too (conftest.py)

PARAMS = ("w1", "b1", "w2", "b2")


def _tensor(a):
    import tvm

    return tvm.runtime.tensor(a)


def _compiler_present() -> bool:
    import tvm

    return not tvm.base._RUNTIME_ONLY


needs_compiler = pytest.mark.skipif(not _compiler_present(), reason="TVM without its compiler")


@needs_compiler
def test_mlp_on_cpu_matches_numpy(cache_dir):
    w = models.mlp_weights(seed=1)
    x = np.random.default_rng(2).standard_normal((4, 16)).astype("float32")
    exe = jitflow.compile(models.mlp(weights=w), "c")
    vm = exe.vm()
    np.testing.assert_allclose(vm["main"](_tensor(x)).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    assert exe.build_info.outcome == "built" and exe.functions == ["main"]
    assert exe.jit().kind == "relax.VMExecutable"
    np.testing.assert_allclose(exe.vm("cpu")["main"](x).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    # the weights as arguments instead of bound constants: vm["main"](x, *params)
    import tvm

    unbound = jitflow.compile(models.mlp_unbound(), "c").vm(tvm.cpu(0))
    out = unbound["main"](_tensor(x), *[_tensor(w[k]) for k in PARAMS])
    np.testing.assert_allclose(out.numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    src = exe.build_info.library.parent / "src"
    assert "__tvm_ffi_matmul" in (src / "host.c").read_text()  # the kernels' host C, built by zig


@needs_compiler
@pytest.mark.parametrize("runtime_only", [False, True], ids=["full-tvm", "runtime-only"])
def test_export_then_load_vm_in_fresh_process(cache_dir, tmp_path, runtime_only):
    out = jitflow.compile(models.mlp(seed=3), "c").export_library(tmp_path / "mlp.so")
    kinds = library_blob.parse(library_blob.blob_of(out)).kinds()
    assert kinds == ["relax.VMExecutable", "_lib"]  # bytecode + weights, and the zig-built host code
    env = {"TVM_USE_RUNTIME_LIB": "1"} if runtime_only else {}
    proc = run_python(f"""
        import numpy as np, tvm, jitflow, models
        assert tvm.base._RUNTIME_ONLY == {runtime_only}
        vm = jitflow.load_vm({str(out)!r}, "cpu")
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
        y = vm["main"](tvm.runtime.tensor(x)).numpy()
        np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights(seed=3)), rtol=1e-5, atol=1e-5)
        from jitflow.report import storage_plan
        print("ok", "tvm_compiler" in tvm.base._LOADED_LIBS, storage_plan({str(out)!r}).total)
    """, env=env)
    assert proc.stdout.split() == ["ok", str(not runtime_only), "1152"]


@needs_compiler
def test_second_process_hits_the_cache_without_lowering(cache_dir):
    jitflow.compile(models.mlp(seed=4), "c").vm()
    proc = run_python("""
        import numpy as np, tvm, jitflow, models, instruments
        x = np.ones((4, 16), "float32")
        mod = models.mlp(seed=4)   # binding the weights runs a pass: before the context
        with instruments.context(instruments.Refuse()):   # a hit must not lower
            exe = jitflow.compile(mod, "c")
            y = exe.vm()["main"](tvm.runtime.tensor(x)).numpy()
        np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights(seed=4)), rtol=1e-5, atol=1e-5)
        print(exe.build_info.outcome)
    """)
    assert proc.stdout.split() == ["hit"]


@needs_compiler
def test_key_covers_weights_and_pipeline(cache_dir):
    import tvm

    w = models.mlp_weights(seed=5)
    base = jitflow.compile(models.mlp(weights=w), "c").key
    assert base == jitflow.compile(models.mlp(weights={k: v.copy() for k, v in w.items()}), "c").key
    nudged = {k: v.copy() for k, v in w.items()}
    nudged["w2"][3, 1] += 1e-3  # one weight of 800
    swapped = dict(w, b1=w["b1"][::-1].copy())
    unbound = models.mlp_unbound()

    @tvm.transform.module_pass(opt_level=0, name="my_pipeline_v1")
    def mine(mod, ctx):
        return tvm.relax.get_pipeline("default")(mod)

    variants = {
        "weight": jitflow.compile(models.mlp(weights=nudged), "c").key,
        "weights order": jitflow.compile(models.mlp(weights=swapped), "c").key,
        "shape": jitflow.compile(models.mlp(batch=8, weights=w), "c").key,
        "unbound": jitflow.compile(unbound, "c").key,
        "pipeline name": jitflow.compile(models.mlp(weights=w), "c", relax_pipeline="zero").key,
        "custom pass": jitflow.compile(models.mlp(weights=w), "c", relax_pipeline=mine).key,
    }
    assert base not in variants.values() and len(set(variants.values())) == len(variants)
    assert jitflow.compile(models.mlp(weights=w), "c", relax_pipeline="default").key == base
    there = run_python("""
        import jitflow, models
        print(jitflow.compile(models.mlp(weights=models.mlp_weights(seed=5)), "c").key)
    """).stdout.strip()
    assert there == base
    with pytest.raises(InvalidInputError, match="unknown Relax pipeline"):
        jitflow.compile(unbound, "c", relax_pipeline="fastest")
    import kernels

    with pytest.raises(InvalidInputError, match="Relax functions"):
        jitflow.compile(kernels.vecadd(), "c", relax_pipeline="zero")


@needs_compiler
def test_key_hashes_weight_bytes_instead_of_printing_them(cache_dir):
    big = models.mlp_weights(d_in=512, hidden=1024, d_out=256)  # 3 MB of weights
    text = keys.module_text(models.mlp(d_in=512, hidden=1024, d_out=256, weights=big))
    assert len(text) < 5000  # the weights are in it as four digests, not as printed data
    digests = [line.split()[-1] for line in text.splitlines() if line.startswith("# constant ")]
    import hashlib

    assert sorted(digests) == sorted(hashlib.sha256(v.tobytes()).hexdigest() for v in big.values())


@needs_compiler
def test_custom_pipeline_is_used(cache_dir):
    import tvm

    calls = []

    @tvm.transform.module_pass(opt_level=0, name="counted_default")
    def counted(mod, ctx):
        calls.append(1)
        return tvm.relax.get_pipeline("default")(mod)

    w = models.mlp_weights(seed=6)
    x = np.ones((4, 16), "float32")
    vm = jitflow.compile(models.mlp(weights=w), "c", relax_pipeline=counted).vm()
    np.testing.assert_allclose(vm["main"](x).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    assert calls == [1]


@needs_compiler
def test_a_pipeline_that_does_not_lower_for_the_vm_says_so_and_the_documented_zero_recipe_builds(cache_dir):
    import tvm
    from tvm import relax

    from jitflow.errors import LoweringError

    w = models.mlp_weights(seed=9)
    with pytest.raises(LoweringError) as err:      # TVM's "zero" legalizes and fuses, and stops there
        jitflow.compile(models.mlp(weights=w), "c", relax_pipeline="zero").build()
    text = str(err.value)
    assert "'zero' left Relax operators that the VM cannot run" in text and "get_pipeline('zero')(mod)" in text
    assert "docs/models.md" in text and "CodeGenVM cannot emit" in text      # TVM's own words follow

    @tvm.transform.module_pass(opt_level=0, name="legalize_only")
    def legalize_only(mod, ctx):
        return relax.transform.LegalizeOps()(mod)

    with pytest.raises(LoweringError, match="must end with the VM lowering passes"):
        jitflow.compile(models.mlp(weights=w), "c", relax_pipeline=legalize_only).build()
    with tvm.target.Target("c"):                   # docs/models.md: "zero" on the module, then compile
        tuned = relax.get_pipeline("zero")(models.mlp(weights=w))
    x = np.random.default_rng(9).standard_normal((4, 16)).astype("float32")
    vm = jitflow.compile(tuned, "c").vm()
    np.testing.assert_allclose(vm["main"](x).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)


@needs_compiler
def test_storage_plan_of_the_mlp(cache_dir):
    exe = jitflow.compile(models.mlp(seed=7), "c")
    plan = storage_plan(exe)
    # TVM's CPU pipeline leaves five kernels; its planner shares blocks between tensors whose lives do not overlap
    assert [(s.size, s.shared_by, s.holds_output) for s in plan.storages] == \
        [(4 * 32 * 4, 2, False), (4 * 32 * 4, 2, False), (4 * 8 * 4, 1, True)]
    assert plan.total == 1152 and plan.dynamic == 0
    assert plan.constant_bytes == sum(v.nbytes for v in models.mlp_weights().values())
    assert plan.storages[1].tensors[1].shape == (4, 8) and plan.storages[1].tensors[1].dtype == "float32"
    assert storage_plan(exe.export_library(cache_dir.parent / "m.so")).to_dict() == plan.to_dict()
    assert "3 allocation(s), 1.1 KiB in all" in str(plan)


@needs_compiler
def test_storage_plan_with_a_symbolic_batch():
    import tvm
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Dynamic:
        @R.function
        def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
            with R.dataflow():
                y = R.nn.relu(R.matmul(x, w))
                R.output(y)
            return y

    plan = storage_plan(tvm.compile(Dynamic, "c"))
    assert plan.dynamic == len(plan.storages) == 2 and plan.total == 0
    assert [t.shape for s in plan.storages for t in s.tensors] == [(None, 8), (None, 8)]


@needs_compiler
def test_tvms_virtual_machine_takes_a_jitflow_executable(cache_dir):
    import tvm

    from jitflow.runtime.virtual_machine import VirtualMachine

    w = models.mlp_weights(seed=9)
    x = np.random.default_rng(3).standard_normal((4, 16)).astype("float32")
    exe = jitflow.compile(models.mlp(weights=w), "c")
    assert isinstance(exe, tvm.runtime.Executable)
    tvms = tvm.relax.VirtualMachine(exe, tvm.cpu())          # TVM's idiom: it calls exe.jit()
    assert type(tvms) is tvm.relax.VirtualMachine
    np.testing.assert_allclose(tvms["main"](_tensor(x)).numpy(), models.mlp_reference(x, w), rtol=1e-5, atol=1e-5)
    assert exe.build_info.outcome == "built"
    ours = exe.vm("cpu")          # jitflow's own (no `tvm` needed), with every public name of TVM's
    assert isinstance(ours, VirtualMachine) and not isinstance(ours, tvm.relax.VirtualMachine)
    public = {n for n in dir(tvm.relax.VirtualMachine) if not n.startswith("_")}
    assert public <= set(dir(ours)), public - set(dir(ours))
    np.testing.assert_array_equal(ours["main"](_tensor(x)).numpy(), tvms["main"](_tensor(x)).numpy())


@needs_compiler
def test_vm_misuse_is_explained(cache_dir, tmp_path):
    import kernels

    exe = jitflow.compile(models.mlp(seed=8), "c")
    with pytest.raises(InvalidInputError, match="built for the CPU"):
        exe.vm("cuda:0")
    with pytest.raises(InvalidInputError, match=r"exe.vm\(device\)\['main'\]"):
        exe["main"]
    with pytest.raises(jitflow.errors.FunctionNotFoundError, match="no function named 'mian'.*functions: 'main'"):
        exe.vm("cpu")["mian"]
    with pytest.raises(jitflow.errors.FunctionNotFoundError, match=r"jitflow.load_vm\(path, device\)\[name\]"):
        exe.jit()["mian"]
    with pytest.raises(InvalidInputError, match="unknown device"):
        exe.vm("tpu")
    kernel_lib = jitflow.compile(kernels.vecadd(), "c").export_library(tmp_path / "k.so")
    with pytest.raises(InvalidInputError, match="holds kernels"):
        jitflow.load_vm(kernel_lib)
    with pytest.raises(LibraryFormatError, match="no storage plan"):
        storage_plan(kernel_lib)
    with pytest.raises(jitflow.errors.LoadError, match="no library"):
        jitflow.load_vm(tmp_path / "missing.so")


@needs_compiler
def test_vm_format_rejects_damaged_bytecode(cache_dir, tmp_path):
    lib = jitflow.compile(models.mlp(seed=9), "c").export_library(tmp_path / "m.so")
    payload = vm_format.payload_of(library_blob.parse(library_blob.blob_of(lib)))
    assert vm_format.parse(payload).entry_functions == ["main"]
    for damaged in (payload[:len(payload) // 2], payload + b"\0", b"\0" * 8 + payload[8:]):
        with pytest.raises(LibraryFormatError):
            vm_format.parse(damaged)


@needs_compiler
def test_cuda_build_holds_a_fatbin_and_no_source(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_BUILD_JOBS", "2")          # the two kernels compile side by side
    exe = jitflow.compile(models.mlp(seed=10), "cuda", arch="sm_90")
    out = exe.export_library(tmp_path / "mlp_cuda.so")
    blob = library_blob.parse(library_blob.blob_of(out))
    # the VM imports the host library, which imports the CUDA modules: two levels deep. The two
    # kernels were compiled side by side, one device module each (TVM looks kernels up in all).
    assert blob.kinds() == ["relax.VMExecutable", "_lib", "cuda", "cuda"]
    assert blob.row_ptr == [0, 1, 3, 3, 3] and blob.child_indices == [1, 2, 3]
    payloads = [library_blob.parse_cuda_payload(m.payload) for m in blob.modules[2:]]
    for payload in payloads:
        assert payload.fmt == "fatbin" and len(payload.kernels) == 1
        assert {(e.kind, e.arch) for e in fatbin.entries(payload.data)} == {("sass", "sm_90"), ("ptx", "compute_90")}
    assert sorted(k.name for p in payloads for k in p.kernels) == ["fused_matmul1_add1_kernel",
                                                                   "fused_matmul_add_relu_kernel"]
    raw = out.read_bytes()
    assert b"__global__" not in raw and b"#include" not in raw
    source = (exe.build_info.library.parent / "src" / "kernels.cu").read_text()
    assert "threadIdx" in source and "__shared__" in source  # scheduled for the GPU by dlight's rules
    plan = storage_plan(out)
    assert [s.shared_by for s in plan.storages] == [1, 1] and plan.storages[-1].holds_output


# --- on a GPU ---------------------------------------------------------------------------------

ARTIFACTS = Path(os.environ.get("JITFLOW_GPU_ARTIFACTS", ROOT / ".gpu-artifacts"))
RUN_MLP = """
    import numpy as np, torch, jitflow, models
    vm = jitflow.load_vm({path!r}, "cuda")
    x = torch.linspace(-1, 1, 64, device="cuda").reshape(4, 16)
    y = torch.from_dlpack(vm["main"](x))
    torch.cuda.synchronize()
    expected = models.mlp_reference(x.cpu().numpy(), models.mlp_weights())
    np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
    print("ok")
"""


@pytest.mark.gpu
@needs_compiler
def test_mlp_on_cuda_matches_torch(cache_dir):
    torch = pytest.importorskip("torch")
    w = models.mlp_weights(seed=11)
    exe = jitflow.compile(models.mlp(weights=w), "cuda")  # arch from the visible GPU
    x = torch.rand(4, 16, device="cuda")
    y = torch.from_dlpack(exe.vm("cuda")["main"](x))
    torch.cuda.synchronize()
    t = {k: torch.from_numpy(v).cuda() for k, v in w.items()}
    expected = torch.relu(x @ t["w1"] + t["b1"]) @ t["w2"] + t["b2"]
    torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4)
    assert exe.build_info.outcome == "built"


@pytest.mark.gpu
@needs_compiler
def test_exported_mlp_runs_in_runtime_only_tvm(cache_dir, tmp_path):
    pytest.importorskip("torch")
    out = jitflow.compile(models.mlp(), "cuda").export_library(tmp_path / "mlp.so")
    proc = run_python(RUN_MLP.format(path=str(out)), env={"TVM_USE_RUNTIME_LIB": "1"})
    assert proc.stdout.split() == ["ok"]


@pytest.mark.gpu
@pytest.mark.skipif(not (ARTIFACTS / "mlp.so").is_file(), reason="no prebuilt mlp.so (tests/gpu_artifacts.py)")
def test_prebuilt_mlp_runs_in_runtime_only_tvm():
    pytest.importorskip("torch")
    proc = run_python(RUN_MLP.format(path=str(ARTIFACTS / "mlp.so")), env={"TVM_USE_RUNTIME_LIB": "1"})
    assert proc.stdout.split() == ["ok"]
