"""The key names exactly what is built: the module as compiled, jitflow's own recipe, the caller's
PassContext, TVM registrations, the environment that reaches the compilers, and a salt.

Each test is a way a cache was shown to hand back a library other than a fresh build's.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import textwrap

import instruments
import kernels
import models
import numpy as np
import pytest
import tvm
from conftest import ROOT, TESTS, run_python
from tvm.script import tirx as T

import jitflow
from jitflow.errors import InvalidInputError

LIBM = """
    import numpy as np, tvm, jitflow, kernels
    {setup}
    exe = jitflow.compile(kernels.libm_calls_f64(), "c")
    a = np.linspace(0.5, 2.0, 64, dtype="float64")
    c = tvm.runtime.tensor(np.zeros(64, "float64"))
    exe["main"](tvm.runtime.tensor(a), c)
    exact = np.allclose(c.numpy(), np.exp(a) + np.log(a) + a ** 1.5, rtol=1e-5)
    with_exp2 = np.allclose(c.numpy(), np.exp2(a) + np.log(a) + a ** 1.5, rtol=1e-5)
    print(exe.build_info.outcome, exe.key, "exp" if exact else "exp2" if with_exp2 else "other")
"""


def libm(setup: str = "", env: dict[str, str] | None = None, cwd=None) -> list[str]:
    code = LIBM.format(setup=textwrap.indent(textwrap.dedent(setup), "    ").strip())
    return run_python(code, env=env, cwd=cwd).stdout.split()


def _axpb_result(exe, n: int = 64) -> np.ndarray:
    c = tvm.runtime.tensor(np.zeros(n, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(n, "float32")), c)
    return c.numpy()


# --- finding 3: the module is copied when compiled -------------------------------------------

def test_changing_the_callers_module_after_compile_changes_nothing(cache_dir):
    mod = kernels.axpb(4000.0)
    exe = jitflow.compile(mod, "c")
    key = exe.key
    mod["main"] = kernels.axpb(4001.0)["main"]       # the caller reuses its module object
    np.testing.assert_allclose(_axpb_result(exe), 4001.0)
    assert exe.key == key == jitflow.compile(kernels.axpb(4000.0), "c").key
    out = run_python("""
        import numpy as np, tvm, jitflow, kernels
        exe = jitflow.compile(kernels.axpb(4000.0), "c")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
        print(exe.build_info.outcome, c.numpy()[0])
    """).stdout.split()
    assert out == ["hit", "4001.0"]   # the next process gets what its module computes


def test_compile_never_modifies_the_callers_module(cache_dir):
    func = kernels.axpb(4002.0)["main"].with_attr("global_symbol", "axpb_kernel")
    mod = tvm.IRModule({"main": func})
    before = mod.script()
    exe = jitflow.compile(mod, "c")
    exe.jit()
    assert mod.script() == before and str(mod["main"].attrs["global_symbol"]) == "axpb_kernel"
    assert exe.functions == ["main"]


def test_a_bound_weight_changed_in_place_is_refused_not_built_under_the_old_key(cache_dir):
    mod = models.mlp(seed=11)
    exe = jitflow.compile(mod, "c")
    exe.key
    found = []
    tvm.relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e.value)
                                        if isinstance(e, tvm.ir.expr.GenericConst) else None)
    weight = found[0]
    weight.copyfrom(np.zeros(weight.shape, weight.dtype))
    with pytest.raises(InvalidInputError, match="changed after its cache key"):
        exe.vm()


# --- finding 4: the environment that reaches the compilers ------------------------------------

def test_clang_override_options_never_reach_the_library(cache_dir):
    poisoned = libm(env={"CCC_OVERRIDE_OPTIONS": "+-Dexp=exp2"})
    assert poisoned[0] == "built" and poisoned[2] == "exp", poisoned
    clean = libm()
    assert clean == ["hit", poisoned[1], "exp"]


def test_nvrtc_variables_that_change_the_cubin_are_keyed(cache_dir):
    code = """
        import jitflow, kernels
        print(jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").key)
    """
    plain = run_python(code).stdout.strip()
    legacy = run_python(code, env={"FINALIZER_USE_LEGACY_ELF_BUILDER": "1"}).stdout.strip()
    assert plain != legacy
    assert run_python(code, env={"NVRTC_DISABLE_PCH": "1"}).stdout.strip() == plain   # speed only


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (a CUDA toolkit)")
def test_nvcc_extra_flags_from_the_environment_are_stripped(zig_cache, tmp_path):
    code = """
        import hashlib, jitflow, kernels
        exe = jitflow.compile(kernels.matmul_shared(), "cuda", arch="sm_90", cuda_compiler="nvcc")
        out = exe.export_library(exe.settings.cache_dir.parent / (exe.settings.cache_dir.name + ".so"))
        print(exe.key, hashlib.sha256(out.read_bytes()).hexdigest())
    """
    runs = {name: run_python(code, env={"JITFLOW_CACHE_DIR": str(tmp_path / name),
                                        "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), **extra}).stdout.split()
            for name, extra in {"plain": {}, "append": {"NVCC_APPEND_FLAGS": "--fmad=false"},
                                "prepend": {"NVCC_PREPEND_FLAGS": "--fmad=false"},
                                "profile": {"PTXAS_FLAGS": "-O0"}}.items()}
    assert len({tuple(r) for r in runs.values()}) == 1, runs


# --- finding 5: jitflow's own recipe ----------------------------------------------------------

def _copy_of_jitflow(tmp_path, edit):
    """The environment of a process that imports an edited copy of jitflow (run it in tmp_path)."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "jitflow", copy / "jitflow", ignore=shutil.ignore_patterns("__pycache__"))
    edit(copy / "jitflow")
    return {"PYTHONPATH": os.pathsep.join([str(copy), str(TESTS)])}


def test_an_edited_build_recipe_is_not_served_old_libraries(cache_dir, tmp_path):
    first = libm()
    assert first[0] == "built"

    def fast_math(package):
        zig = package / "toolchain" / "zig_cc" / "zig.py"
        text = zig.read_text()
        assert '_FLAGS = ["-O2",' in text
        zig.write_text(text.replace('_FLAGS = ["-O2",', '_FLAGS = ["-O2", "-ffast-math",'))

    edited = libm(env=_copy_of_jitflow(tmp_path / "a", fast_math), cwd=tmp_path)
    assert edited[0] == "built" and edited[1] != first[1]

    def new_data_file(package):
        (package / "builder" / "prelude_extra.h").write_text("/* a file added later */\n")

    added = libm(env=_copy_of_jitflow(tmp_path / "b", new_data_file), cwd=tmp_path)
    assert added[0] == "built" and added[1] not in (first[1], edited[1])


# --- finding 6: TVM registrations -------------------------------------------------------------

EXP2_RULE = """
    def exp2(op):
        return tvm.tirx.call_pure_extern("float64", "exp2", op.args[0])
    tvm.tirx.op.register_intrin_lowering("tirx.exp", "c", f=exp2, level=99)
"""


def test_a_registered_intrinsic_lowering_changes_the_key(cache_dir):
    plain = libm()
    registered = libm(EXP2_RULE)
    assert registered[0] == "built" and registered[2] == "exp2" and registered[1] != plain[1]
    assert libm() == ["hit", plain[1], "exp"]


SIGMOID = """
    import numpy as np, tvm, jitflow, kernels, models
    {setup}
    exe = jitflow.compile(kernels.sigmoid(), "c")
    a = np.linspace(-4.0, 4.0, 64, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(a), c)
    exact = np.allclose(c.numpy(), 1 / (1 + np.exp(-a)), rtol=1e-5, atol=1e-6)
    model_key = jitflow.compile(models.sigmoid_model(), "c").key   # exp appears only when legalized
    print(exe.build_info.outcome, exe.key, "exact" if exact else "other", model_key)
"""
FAST_EXP_RULE = """
    def fast_exp(op):   # a crude exp: a library built with it is visibly different
        x = op.args[0]
        return tvm.tirx.const(1.0, "float32") + x + x * x * tvm.tirx.const(0.5, "float32")
    tvm.tirx.register_intrin_lowering("tirx.exp", "c", f=fast_exp, level=99)
"""


def test_a_lowering_rule_for_an_intrinsic_the_module_does_not_name_changes_the_key(cache_dir):
    def run(setup: str = "") -> list[str]:
        code = SIGMOID.format(setup=textwrap.indent(textwrap.dedent(setup), "    ").strip())
        return run_python(code).stdout.split()

    fast = run(FAST_EXP_RULE)
    assert fast[0] == "built" and fast[2] == "other"     # the rule reached sigmoid's exp
    plain = run()
    assert plain[0] == "built" and plain[2] == "exact", (fast, plain)
    assert plain[1] != fast[1] and plain[3] != fast[3]
    assert run() == ["hit", plain[1], "exact", plain[3]]


AXPB = """
    import numpy as np, tvm, jitflow, kernels
    {setup}
    exe = jitflow.compile(kernels.axpb(4300.0), "c")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    print(exe.build_info.outcome, exe.key, c.numpy()[0])
"""
CUSTOM_TIR_PIPELINE = """
    import bound_pipelines
    tvm.tirx.register_tir_pipeline("s_tir", bound_pipelines.custom)   # the name tvm.compile's "default" stands for
"""


def test_a_custom_tir_pipeline_under_the_default_name_changes_the_key(cache_dir):
    def run(setup: str = "") -> list[str]:
        code = AXPB.format(setup=textwrap.indent(textwrap.dedent(setup), "    ").strip())
        return run_python(code).stdout.split()

    custom = run(CUSTOM_TIR_PIPELINE)
    assert custom[0] == "built" and custom[2] == "4302.0"     # the custom pipeline ran
    plain = run()
    assert plain[0] == "built" and plain[2] == "4301.0" and plain[1] != custom[1], (custom, plain)
    assert run(CUSTOM_TIR_PIPELINE) == ["hit", custom[1], "4302.0"]   # its identity is stable across processes


PIPELINE_FACTORY = """
    import bound_pipelines
    tvm.tirx.register_tir_pipeline("s_tir", bound_pipelines.factory({scale}, {hold_a_pass}))
"""


def test_a_pipeline_made_by_a_factory_is_keyed_by_what_its_closure_holds(cache_dir):
    def run(scale: float, hold_a_pass: bool = False, env: dict | None = None) -> tuple[list[str], str]:
        setup = PIPELINE_FACTORY.format(scale=scale, hold_a_pass=hold_a_pass)
        code = AXPB.format(setup=textwrap.indent(textwrap.dedent(setup), "    ").strip())
        proc = run_python(code + "    print(jitflow.compile(kernels.axpb(4300.0), 'c').build().outcome)\n", env=env)
        return proc.stdout.split(), proc.stderr

    one, _ = run(1.0)
    other, _ = run(101.0)                      # the same code, another value in its closure
    assert one[0] == "built" and one[2] == "2.0" and other[0] == "built" and other[2] == "102.0", (one, other)
    assert one[1] != other[1]                  # it used to be a hit on the first one's library: 2.0
    assert run(1.0)[0][:3] == ["hit", one[1], "2.0"]
    held, err = run(101.0, hold_a_pass=True)   # a value the key cannot name: built, never cached
    assert held[0] == "built" and held[2] == "102.0" and held[3] == "built", held
    assert "this build is not cached: the TIR pipeline registered under 's_tir'" in err
    assert "its closure cell 'scaled_pass' holds a TVM pass (PrimFuncPass)" in err and "cache_salt=" in err
    salted, _ = run(101.0, hold_a_pass=True, env={"JITFLOW_CACHE_SALT": "scaled by 101"})
    assert salted[0] == "built" and salted[3] == "hit", salted     # the caller's salt names it: cached


@pytest.fixture
def tir_pipeline():
    """register(callable) puts it under "s_tir" (the name tvm.compile's "default" stands for) until
    the test ends."""
    from tvm.tirx.compilation_pipeline import PIPELINE_MAP

    default = PIPELINE_MAP["s_tir"]
    yield lambda fn: tvm.tirx.register_tir_pipeline("s_tir", fn)
    PIPELINE_MAP["s_tir"] = default


@pytest.mark.parametrize("kind", ["partial", "object", "method", "lru_cache", "class"])
def test_a_pipeline_bound_to_a_value_is_keyed_by_that_value(cache_dir, tir_pipeline, kind):
    """A partial, a callable object, a bound method, a function in functools.lru_cache, a class
    registered itself: the same code with another bound value is another pipeline (each was keyed by
    its type and code or its name only, and served the other's library)."""
    import bound_pipelines

    def key(scale: float) -> str:
        tir_pipeline(bound_pipelines.make(kind, scale))     # a new object each time: keyed by value, not id
        return jitflow.compile(kernels.axpb(4300.0), "c").key

    assert key(1.0) == key(1.0) and key(1.0) != key(101.0) and key(101.0) == key(101.0)
    for scale, outcome in ((1.0, "built"), (101.0, "built"), (1.0, "hit")):
        tir_pipeline(bound_pipelines.make(kind, scale))
        exe = jitflow.compile(kernels.axpb(4300.0), "c")
        np.testing.assert_allclose(_axpb_result(exe), scale + 1)
        assert exe.build_info.outcome in ((outcome,) if outcome == "built" else ("hit", "memory"))


def test_a_bound_pipelines_key_is_the_same_in_another_process(cache_dir, tir_pipeline):
    import bound_pipelines

    code = textwrap.dedent("""
        import jitflow, kernels, tvm, bound_pipelines
        for kind in bound_pipelines.KINDS:
            tvm.tirx.register_tir_pipeline("s_tir", bound_pipelines.make(kind, 7.0))
            print(jitflow.compile(kernels.axpb(4300.0), "c").key)
    """)
    here = []
    for kind in bound_pipelines.KINDS:
        tir_pipeline(bound_pipelines.make(kind, 7.0))
        here.append(jitflow.compile(kernels.axpb(4300.0), "c").key)
    assert run_python(code).stdout.split() == here and len(set(here)) == len(bound_pipelines.KINDS)


def test_an_object_whose_state_cannot_be_named_is_built_and_not_cached(cache_dir, tir_pipeline):
    import threading

    import bound_pipelines

    held = bound_pipelines.Scaled(5.0)
    held.lock = threading.Lock()                 # pickle refuses it: its state cannot be named
    tir_pipeline(held)
    exe = jitflow.compile(kernels.axpb(4300.0), "c")
    assert "holds a _thread.lock object, which the key cannot name" in exe.cache_key.uncacheable
    np.testing.assert_allclose(_axpb_result(exe), 6.0)
    assert exe.build_info.outcome == "built" and not exe.cached()


def test_a_relax_pipeline_made_by_a_factory_is_keyed_by_what_it_holds(cache_dir):
    from tvm.relax.pipeline import PIPELINE_MAP, zero_pipeline

    def factory(fold):
        def mine(**kwargs):
            passes = [zero_pipeline(**kwargs)] + ([tvm.relax.transform.FoldConstant()] if fold else [])
            return tvm.transform.Sequential(passes)
        return mine

    def key(fold) -> str:
        PIPELINE_MAP["jitflow_factory_test"] = factory(fold)
        return jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_factory_test").key

    try:
        assert key(True) != key(False) and key(True) == key(True)
        PIPELINE_MAP["jitflow_factory_test"] = functools.lru_cache(maxsize=None)(factory(True))
        folded = jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_factory_test").key
        PIPELINE_MAP["jitflow_factory_test"] = functools.lru_cache(maxsize=None)(factory(False))
        assert folded != jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_factory_test").key
        PIPELINE_MAP["jitflow_factory_test"] = lambda p=tvm.relax.transform.FoldConstant(), **kw: p
        exe = jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_factory_test")
        assert "the Relax pipeline 'jitflow_factory_test'" in exe.cache_key.uncacheable
        assert not exe.cached()
    finally:
        del PIPELINE_MAP["jitflow_factory_test"]


def test_registered_codegen_callbacks_and_pipelines_change_the_key(cache_dir):
    out = run_python("""
        import tvm, tvm_ffi, jitflow, kernels, models, bound_pipelines
        cuda = lambda: jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").key
        before = cuda()
        tvm_ffi.register_global_func("tvm_callback_cuda_postproc", lambda code, target: code)
        print(before != cuda())

        from tvm.relax.pipeline import PIPELINE_MAP
        PIPELINE_MAP["jitflow_test"] = bound_pipelines.zero_only
        relax = lambda: jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_test").cache_key
        first = relax()
        PIPELINE_MAP["jitflow_test"] = bound_pipelines.zero_then_fold
        print(first.digest != relax().digest, first.uncacheable)
    """)
    assert out.stdout.split() == ["True", "True", "None"]


def test_a_class_registered_as_the_pipeline_is_keyed_by_its_methods(cache_dir, tir_pipeline):
    """Two classes of one qualified name whose methods build other kernels: two keys (a class was
    keyed by its name only)."""
    import bound_pipelines

    def key(cls) -> str:
        tir_pipeline(cls)
        return jitflow.compile(kernels.axpb(4300.0), "c").key

    first = key(bound_pipelines.FIRST_SHIFTED)
    assert first != key(bound_pipelines.Shifted) and first == key(bound_pipelines.FIRST_SHIFTED)
    assert bound_pipelines.FIRST_SHIFTED.__qualname__ == bound_pipelines.Shifted.__qualname__


def test_a_pipeline_without_source_text_is_built_and_not_cached(cache_dir, tir_pipeline, monkeypatch):
    """A function made by exec (or given to python -c) has no source text to key it by: the build is
    not cached, saying so, until a cache salt names it."""
    import bound_pipelines

    space = {"__name__": "made_by_exec", "scaled": bound_pipelines.scaled}
    exec("def made(**kwargs):\n    return scaled(6.0, **kwargs)\n", space)
    tir_pipeline(space["made"])
    exe = jitflow.compile(kernels.axpb(4300.0), "c")
    assert "the TIR pipeline registered under 's_tir' (made_by_exec.made)" in exe.cache_key.uncacheable
    assert "whose source text cannot be found (a function made by exec" in exe.cache_key.uncacheable
    np.testing.assert_allclose(_axpb_result(exe), 7.0)
    assert exe.build_info.outcome == "built" and not exe.cached()
    monkeypatch.setenv("JITFLOW_CACHE_SALT", "made by exec, scale 6")
    assert jitflow.compile(kernels.axpb(4300.0), "c").cache_key.uncacheable is None


# --- finding 7: the caller's PassContext ------------------------------------------------------

@T.prim_func
def _stepped(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    for i in T.serial(0, 64, step=3):
        C[i] = A[i] * T.float32(2)


def _host_c(exe) -> str:
    return (exe.settings.cache_dir / "v1" / "entries" / exe.key[:2] / exe.key / "src" / "host.c").read_text()


def test_disabled_passes_of_the_callers_context_are_honoured_and_keyed(cache_dir):
    mod = tvm.IRModule({"main": _stepped})
    plain = jitflow.compile(mod, "c")
    plain.jit()
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["s_tir.CanonicalizeLoop"]):
        stepped = jitflow.compile(mod, "c")
        stepped.jit()
    assert stepped.key != plain.key
    assert "i += 3" in _host_c(stepped) and "i += 3" not in _host_c(plain)
    a = np.arange(64, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    stepped["main"](tvm.runtime.tensor(a), c)
    np.testing.assert_allclose(c.numpy()[::3], a[::3] * 2)


def test_opt_level_config_and_instruments_of_the_callers_context(cache_dir):
    mod = kernels.axpb(4100.0)
    default = jitflow.compile(mod, "c").key
    with tvm.transform.PassContext(opt_level=3):
        assert jitflow.compile(mod, "c").key == default     # the same as no context
    with tvm.transform.PassContext(opt_level=2):
        assert jitflow.compile(mod, "c").key != default     # entered explicitly: honoured
    record = instruments.Record()
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_vectorize": True}, instruments=[record]):
        exe = jitflow.compile(mod, "c", pass_config={"tirx.disable_cse_tir": True})
    only_pass_config = jitflow.compile(mod, "c", pass_config={"tirx.disable_cse_tir": True})
    assert exe.key not in (default, only_pass_config.key)
    np.testing.assert_allclose(_axpb_result(exe), 4101.0)   # built outside the with: still its context
    assert record.passes, "the caller's instrument did not see jitflow's lowering"
    meta = json.loads((cache_dir / "v1" / "entries" / exe.key[:2] / exe.key / "meta.json").read_text())
    assert meta["key_inputs"]["options"]["pass_context"]["config"] == {
        "tirx.disable_cse_tir": True, "tirx.disable_vectorize": True}


# --- the salt ---------------------------------------------------------------------------------

def test_cache_salt_changes_the_key(cache_dir, monkeypatch):
    base = jitflow.compile(kernels.axpb(4200.0), "c").key
    salted = jitflow.compile(kernels.axpb(4200.0), "c", cache_salt="postproc v2").key
    assert salted != base
    monkeypatch.setenv("JITFLOW_CACHE_SALT", "postproc v2")
    assert jitflow.compile(kernels.axpb(4200.0), "c").key == salted
    assert jitflow.compile(kernels.axpb(4200.0), "c", cache_salt="").key == base   # the argument wins
    with pytest.raises(InvalidInputError, match="cache_salt"):
        jitflow.compile(kernels.axpb(4200.0), "c", cache_salt=3)
