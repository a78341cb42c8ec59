"""A library built above the baseline CPU level runs where the CPU has that level, says so in its
digest record and in `inspect`, and is refused before dlopen, with a LoadError naming the features,
where the CPU lacks any of them (never SIGILL)."""
from __future__ import annotations

import json
import shutil

import c_host_kernels as K
import models
from kernels import axpb as kernels_axpb
import numpy as np
import pytest
from conftest import module_cache

import jitflow
from jitflow.errors import LoadError
from jitflow.formats import library_digest
from jitflow.report import inspect_library
from jitflow.runtime import cpu_features, library_check
from jitflow.targets import cpu_level
from jitflow.targets.cpu_level import X86

HERE = cpu_features.this_cpu().features if library_check.this_machine() == "x86_64" else frozenset()
#: the highest of the two levels this CPU has: the library must run here
LEVEL = next((name for name in ("x86-64-v3", "x86-64-v2") if HERE >= set(cpu_level.LEVELS[X86][name][1])), None)
pytestmark = pytest.mark.skipif(LEVEL is None, reason="needs an x86-64 CPU of level x86-64-v2 or higher")
CASES = K.VECTORS + K.BFLOAT16 + K.INTRINSICS       # vectors of 2 to 32 lanes, float16 and bfloat16 math


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """The vector, bfloat16 and intrinsic kernels built at LEVEL, loaded, and exported."""
    with module_cache(tmp_path_factory, zig_cache):
        exe = jitflow.compile(K.module(CASES, main=CASES[0].name), "c", cpu_level=LEVEL)
        exe.jit()
        yield exe, exe.export_library(tmp_path_factory.mktemp("level") / "kernels.so")


def _record(path) -> library_digest.Record:
    data = path.read_bytes()
    return library_digest.read(lambda at, n: data[at:at + n], len(data))


def _resealed(source, dest, cpu: dict):
    """A copy of the library whose digest record states `cpu` (a valid record: its sha256 holds)."""
    record = _record(source)
    shutil.copyfile(source, dest)
    with open(dest, "r+b") as f:
        f.truncate(record.covered)
    library_digest.seal(dest, dict(record.fields, cpu=cpu))
    return dest


def test_a_library_at_this_cpus_level_matches_numpy(built):
    exe, exported = built
    shipped = jitflow.load(exported)
    for case in CASES:
        arrays = case.inputs(np.random.default_rng(11))
        K.check(case, arrays, K.call(exe[case.name], case, arrays))
        K.check(case, arrays, K.call(shipped[case.name], case, arrays))


def test_a_level_changes_no_result_products_and_sums_round_apart(built):
    exe, _ = built
    a, b = (np.random.default_rng(n).standard_normal(64).astype("float32") for n in (1, 2))
    c = np.zeros(64, "float32")
    exe["fma_f32_x8"](a, b, c)
    unfused = a * b + a                                                  # two roundings, as TIR means
    fused = (a.astype("float64") * b + a).astype("float32")              # one rounding: what an FMA gives
    assert np.any(fused != unfused)                                      # these inputs tell them apart
    np.testing.assert_array_equal(c, unfused)


def test_the_record_and_inspect_state_the_level_and_what_it_needs(built, capsys):
    _, exported = built
    needs = sorted(cpu_level.LEVELS[X86][LEVEL][1])
    assert _record(exported).fields["cpu"] == {"level": LEVEL, "needs": needs}
    report = inspect_library(exported)
    assert (report.library.cpu_level, list(report.library.cpu_needs)) == (LEVEL, needs)
    assert f"cpu level: {LEVEL}; needs {', '.join(needs)}" in str(report)
    from jitflow.cli.main import main

    assert main(["inspect", str(exported), "--json"]) == 0
    assert f'"cpu_level": "{LEVEL}"' in capsys.readouterr().out


def test_a_library_needing_a_feature_this_cpu_lacks_is_refused_before_dlopen(built, tmp_path):
    _, exported = built
    needs = [*cpu_level.LEVELS[X86][LEVEL][1], "jitflow_test_feature"]
    fake = _resealed(exported, tmp_path / "fake.so", {"level": LEVEL, "needs": needs})
    with pytest.raises(LoadError) as err:
        jitflow.load(fake)
    text = str(err.value)
    assert f"cannot load {fake}" in text and "needs the CPU features jitflow_test_feature, which this CPU" in text
    assert f"built for CPU level {LEVEL}" in text and "avx" not in text.split("lacks")[0]   # only what lacks
    with open("/proc/self/maps") as maps:
        assert str(fake) not in maps.read()            # never mapped: the dynamic loader never saw it


def test_a_cpu_without_the_level_refuses_the_cache_hit_and_the_export(built):
    exe, exported = built
    lower = {f for f in HERE if f not in cpu_level.LEVELS[X86][LEVEL][1]} | {"sse4_2", "popcnt"}
    with cpu_features.simulated(lower, "a CPU of another node"):
        again = jitflow.compile(exe.mod, "c", cpu_level=LEVEL)
        assert again.build().outcome == "hit"           # building and finding need no particular CPU
        with pytest.raises(LoadError, match=r"this library is built for CPU level .* which this CPU \(a CPU of "
                                            r"another node\) lacks: export_library\(\) it and load it"):
            again.jit()
        with pytest.raises(LoadError, match=f"cannot load {exported}: it is built for CPU level {LEVEL}"):
            jitflow.load(exported)
        assert "sse4_1" in str(pytest.raises(LoadError, jitflow.load, exported).value)
    assert jitflow.load(exported) is not None            # the real CPU again


def test_a_model_at_the_level_runs_and_load_vm_refuses_what_this_cpu_lacks(cache_dir, tmp_path):
    exe = jitflow.compile(models.mlp(), "c", cpu_level=LEVEL)
    shipped = exe.export_library(tmp_path / "mlp.so")
    x = np.random.default_rng(5).standard_normal((4, 16)).astype("float32")
    got = jitflow.load_vm(shipped, "cpu")["main"](x).numpy()
    np.testing.assert_allclose(got, models.mlp_reference(x, models.mlp_weights()), rtol=1e-5, atol=1e-5)
    fake = _resealed(shipped, tmp_path / "mlp_fake.so", {"level": LEVEL, "needs": ["jitflow_test_feature"]})
    with pytest.raises(LoadError, match="needs the CPU features jitflow_test_feature, which this CPU"):
        jitflow.load_vm(fake, "cpu")


def test_cpu_needs_in_a_form_jitflow_cannot_read_are_refused(built, tmp_path):
    _, exported = built
    odd = _resealed(exported, tmp_path / "odd.so", {"level": LEVEL, "needs": "avx2"})
    with pytest.raises(LoadError, match="the CPU features it needs are not a list of names"):
        jitflow.load(odd)


def test_a_cpu_whose_features_cannot_be_read_loads_only_the_baseline(built, tmp_path, monkeypatch):
    _, exported = built
    baseline = _resealed(exported, tmp_path / "baseline.so", {"level": "x86-64", "needs": []})
    monkeypatch.setattr(cpu_features, "CPUINFO", str(tmp_path / "no-cpuinfo"))
    cpu_features._read.cache_clear()
    try:
        with pytest.raises(LoadError, match="cannot read this CPU's features from .*no-cpuinfo"):
            jitflow.load(exported)
        assert jitflow.load(baseline) is not None
    finally:
        cpu_features._read.cache_clear()


X86_CPUINFO = """processor\t: 0
model name\t: Example CPU @ 3.0GHz
flags\t\t: fpu sse sse2 avx avx2 avx512f
processor\t: 1
model name\t: Example CPU @ 3.0GHz
flags\t\t: fpu sse sse2 avx avx2
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes pmull sve2
CPU part\t: 0xd4f
"""


def test_cpuinfo_features_are_those_every_processor_has():
    assert cpu_features.parse(X86_CPUINFO, "x86_64") == cpu_features.CpuFeatures(
        frozenset({"fpu", "sse", "sse2", "avx", "avx2"}), "Example CPU @ 3.0GHz")
    assert cpu_features.parse(ARM_CPUINFO, "aarch64").features == {"fp", "asimd", "evtstrm", "aes", "pmull", "sve2"}
    assert cpu_features.parse("", "x86_64").features == frozenset()


ABOVE_THIS_CPU = """
    import json, jitflow, kernels, models
    from jitflow.errors import LoadError
    from jitflow.runtime import cpu_features
    here = cpu_features.this_cpu().features
    without = {{f for f in here if not f.startswith("avx512")}}     # this CPU, less AVX-512: x86-64-v3 at most
    seen = {{}}
    with cpu_features.simulated(without, "a CPU without AVX-512"):
        for name, call in (("load", lambda: jitflow.load({kernel!r})),
                           ("load_vm", lambda: jitflow.load_vm({model!r}, "cpu")),
                           ("jit", lambda: jitflow.compile(kernels.axpb(990.0), "c", cpu_level="x86-64-v4").jit())):
            try:
                call()
                seen[name] = "loaded"
            except LoadError as exc:
                seen[name] = str(exc)
    maps = open("/proc/self/maps").read()
    seen["mapped"] = [p for p in ({kernel!r}, {model!r}) if p in maps]
    print(json.dumps(seen))
"""


@pytest.mark.skipif(not HERE >= set(cpu_level.LEVELS[X86]["x86-64-v3"][1]), reason="needs an x86-64-v3 CPU")
def test_a_library_built_for_more_cpu_than_this_one_is_refused_before_dlopen_never_sigill(cache_dir, tmp_path):
    kernel = jitflow.compile(kernels_axpb(990.0), "c", cpu_level="x86-64-v4").export_library(tmp_path / "v4.so")
    model = jitflow.compile(models.mlp(), "c", cpu_level="x86-64-v4").export_library(tmp_path / "mlp_v4.so")
    from conftest import run_python

    proc = run_python(ABOVE_THIS_CPU.format(kernel=str(kernel), model=str(model)))     # a SIGILL would fail it
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen.pop("mapped") == []                              # the dynamic loader never saw them
    for name, text in seen.items():
        assert "built for CPU level x86-64-v4" in text and "avx512f" in text, (name, text)
        assert "which this CPU (a CPU without AVX-512) lacks" in text
        assert "cpu_level='x86-64-v3' (the highest level this CPU runs)" in text, (name, text)
