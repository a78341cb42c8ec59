"""CPU levels: names and errors, what each level needs (checked against the compiler itself), native
resolved to a concrete CPU before keying, and an Arm level's kernel run under qemu."""
from __future__ import annotations

import subprocess

import arm_qemu
import kernels
import numpy as np
import pytest

import jitflow
from jitflow.errors import InvalidInputError, TargetError
from jitflow.runtime import cpu_features
from jitflow.targets import cpu_level, machine_host
from jitflow.targets.cpu_level import ARM, X86
from jitflow.toolchain.zig_cc import zig

#: /proc/cpuinfo feature lists of machines jitflow builds for (what their kernels report)
HASWELL = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
           "ss ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 "
           "x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm fsgsbase bmi1 avx2 smep bmi2 "
           "erms invpcid xsaveopt").split()
SAPPHIRE_RAPIDS = HASWELL + ("avx512f avx512dq adx avx512ifma avx512cd avx512bw avx512vl avx512vbmi "
                             "avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq "
                             "avx_vnni avx512_bf16 avx512_fp16 amx_tile sha_ni").split()
WESTMERE = "fpu cx8 cmov mmx fxsr sse sse2 syscall lm pni ssse3 cx16 sse4_1 sse4_2 popcnt lahf_lm".split()
GRACE = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop "
         "sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes "
         "svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti").split()
GRAVITON2 = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp "
             "ssbs").split()

#: the compiler's feature macros -> the /proc/cpuinfo feature a CPU needs for the code it allows
X86_MACROS = {"__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1", "__SSE4_2__": "sse4_2",
              "__CRC32__": "sse4_2", "__POPCNT__": "popcnt", "__LAHF_SAHF__": "lahf_lm",
              "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16": "cx16", "__AVX__": "avx", "__AVX2__": "avx2",
              "__BMI__": "bmi1", "__BMI2__": "bmi2", "__F16C__": "f16c", "__FMA__": "fma", "__LZCNT__": "abm",
              "__MOVBE__": "movbe", "__XSAVE__": "xsave", "__AVX512F__": "avx512f", "__AVX512BW__": "avx512bw",
              "__AVX512CD__": "avx512cd", "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl",
              "__AVX512IFMA__": "avx512ifma", "__AVX512VBMI__": "avx512vbmi", "__AVX512VBMI2__": "avx512_vbmi2",
              "__AVX512VNNI__": "avx512_vnni", "__AVX512BITALG__": "avx512_bitalg",
              "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq", "__AVX512BF16__": "avx512_bf16",
              "__AVX512FP16__": "avx512_fp16", "__AVXVNNI__": "avx_vnni", "__GFNI__": "gfni", "__ADX__": "adx"}
ARM_MACROS = {"ATOMICS": "atomics", "CRC32": "crc32", "QRDMX": "asimdrdm", "DOTPROD": "asimddp",
              "FP16_SCALAR_ARITHMETIC": "fphp", "FP16_VECTOR_ARITHMETIC": "asimdhp", "FP16_FML": "asimdfhm",
              "RCPC": "lrcpc", "COMPLEX": "fcma", "JCVT": "jscvt", "FRINT": "frint", "BF16": "bf16",
              "BF16_SCALAR_ARITHMETIC": "bf16", "BF16_VECTOR_ARITHMETIC": "bf16", "MATMUL_INT8": "i8mm",
              "SVE": "sve", "SVE_VECTOR_OPERATORS": "sve", "SVE2": "sve2", "SVE2_BITPERM": "svebitperm",
              "SVE_BF16": "svebf16", "SVE_MATMUL_INT8": "svei8mm"}
#: emitted only under -mbranch-protection, which jitflow never passes (and hint-space instructions)
ARM_UNCHECKED = {"PAUTH", "BTI"}
#: Armv8.4/8.5 features clang announces by no macro (flag manipulation, LDAPUR): a level above
#: neoverse-n1 implies them, and needs them. (Some macros follow the architecture version rather
#: than the feature: RDM, JCVT, FCMA, FRINT; native on Arm asks for those on a v8.0 base.)
NO_MACRO = {"flagm", "flagm2", "ilrcpc"}


def needs_what_the_compiler_may_use(needs, host: str, cpu: str, exact: bool = True) -> None:
    """Every feature the compiler may use is needed (never SIGILL); with `exact`, nothing more."""
    may_use = compiler_features(host, cpu)
    assert may_use <= set(needs)
    if exact:
        assert set(needs) - may_use <= NO_MACRO


def compiler_features(host: str, cpu: str | None) -> set[str]:
    """The /proc/cpuinfo features the code zig compiles for `cpu` may use, read from the feature
    macros it predefines beyond the baseline's; a macro this test does not know fails it."""
    def macros(flags: list[str]) -> set[str]:
        out = subprocess.run([zig.zig_binary(), "cc", "-target", zig.ZIG_TARGETS[host], *flags, "-dM", "-E",
                              "-x", "c", "/dev/null"], capture_output=True, text=True, check=True).stdout
        return {line.split()[1] for line in out.splitlines() if line.startswith("#define ")}

    added = macros([f"-mcpu={cpu}"] if cpu else []) - macros([])
    if host == X86:
        features = {X86_MACROS[m] for m in added if m in X86_MACROS}
        unknown = {m for m in added if m not in X86_MACROS}
    else:
        names = {m.removeprefix("__ARM_FEATURE_") for m in added if m.startswith("__ARM_FEATURE_")}
        features = {ARM_MACROS[n] for n in names if n in ARM_MACROS}
        unknown = names - set(ARM_MACROS) - ARM_UNCHECKED | {m for m in added if not m.startswith("__ARM_")}
        unknown -= {"__ARM_ARCH"}      # its value moves with the level, not a feature of its own
    assert not unknown, f"feature macros this test does not map (a zig update?): {sorted(unknown)}"
    return features


# -- names and errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, name", [("x86-64-v3", "x86-64-v3"), (" X86_64_V4 ", "x86-64-v4"),
                                        ("neoverse_v2", "neoverse-v2"), ("Native", "native"), ("", None)])
def test_level_spellings(text, name):
    assert cpu_level.normalize(text) == name


def test_the_default_and_its_names_are_the_baseline():
    for host in (X86, ARM):
        for value in (None, "baseline", cpu_level.BASELINES[host]):
            assert cpu_level.resolve(value, host, lambda: (), X86) is None


@pytest.mark.parametrize("value, host, says", [
    ("x86-64-v5", X86, "'x86-64-v5' is not a CPU level; for x86-64 hosts: x86-64 (the default"),
    ("x86-64-v3", ARM, "'x86-64-v3' is for x86_64-linux-gnu hosts, and the build is for aarch64-linux-gnu; "
                       "choose one of armv8-a (the default: any aarch64 CPU), armv8.2-a, neoverse-n1"),
    ("neoverse-v2", X86, "choose one of x86-64 (the default: any x86_64 CPU), x86-64-v2, x86-64-v3, x86-64-v4"),
    ("native", ARM, "'native' means this machine's CPU (x86_64-linux-gnu), and the build is for aarch64"),
    (3, X86, "must be a CPU level name such as 'x86-64-v3', not int"),
])
def test_a_bad_level_names_the_choices(value, host, says):
    with pytest.raises(TargetError) as err:
        cpu_level.resolve(value, host, lambda: HASWELL, X86)
    assert says in str(err.value)


def test_a_bad_level_from_the_environment_names_the_variable(cache_dir, monkeypatch):
    monkeypatch.setenv("JITFLOW_CPU_LEVEL", "skylake")
    with pytest.raises(InvalidInputError, match="JITFLOW_CPU_LEVEL='skylake' is not a CPU level"):
        jitflow.compile(kernels.axpb(), "c")
    monkeypatch.setenv("JITFLOW_CPU_LEVEL", "x86-64-v2")
    assert jitflow.compile(kernels.axpb(), "c", host=X86).options.cpu_level.name == "x86-64-v2"
    assert jitflow.compile(kernels.axpb(), "c", host=X86, cpu_level="baseline").options.cpu_level is None


# -- what each level needs, checked against the compiler ------------------------------------------

@pytest.mark.parametrize("host, name", [(h, n) for h in (X86, ARM) for n in cpu_level.LEVELS[h]])
def test_each_level_needs_every_feature_the_compiler_may_use(host, name):
    level = cpu_level.resolve(name, host, lambda: (), None)
    needs_what_the_compiler_may_use(level.needs, host, level.zig_cpu)


def test_x86_levels_are_the_psabi_levels():
    v2, v3, v4 = (set(cpu_level.LEVELS[X86][f"x86-64-v{n}"][1]) for n in (2, 3, 4))
    assert v2 == {"cx16", "lahf_lm", "pni", "popcnt", "sse4_1", "sse4_2", "ssse3"}
    assert v3 - v2 == {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    assert v4 - v3 == {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    assert cpu_level.reached(X86, HASWELL) == "x86-64-v3" and cpu_level.reached(X86, WESTMERE) == "x86-64-v2"
    assert cpu_level.reached(ARM, GRACE) == "neoverse-v2" and cpu_level.reached(ARM, GRAVITON2) == "neoverse-n1"


# -- native ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("host, cpu, level, has", [
    (X86, HASWELL, "x86_64_v3", set()), (X86, WESTMERE, "x86_64_v2", set()),
    (X86, SAPPHIRE_RAPIDS, "x86_64_v4", {"avx512_fp16", "avx512_vnni", "avx_vnni", "gfni", "adx"}),
    (ARM, GRACE, "generic", {"sve2", "svebitperm", "bf16", "svebf16", "i8mm", "asimddp"}),
    (ARM, GRAVITON2, "generic", {"asimddp", "fphp", "lrcpc", "atomics"}),
], ids=["haswell", "westmere", "sapphire-rapids", "grace", "graviton2"])
def test_native_is_a_concrete_cpu_that_needs_only_what_the_cpu_has(host, cpu, level, has):
    here = cpu_level.native(host, cpu)
    assert here.zig_cpu.split("+")[0] == level and has <= set(here.needs) <= set(cpu)
    needs_what_the_compiler_may_use(here.needs, host, here.zig_cpu, exact=False)   # all the CPU's own
    assert not {"aes", "sha_ni", "vaes", "pmull", "sha3", "rng"} & set(here.needs)   # intrinsics only: not asked


@pytest.mark.skipif(machine_host() != X86, reason="simulates x86-64 CPUs")
def test_native_resolves_before_keying_so_two_cpus_get_two_keys(cache_dir):
    exe = jitflow.compile(kernels.axpb(), "c", cpu_level="native")
    level = exe.options.cpu_level
    assert level.name == "native" and "native" not in level.zig_cpu
    assert set(level.needs) <= cpu_features.this_cpu().features
    keys = {}
    for name, cpu in (("haswell", HASWELL), ("sapphire rapids", SAPPHIRE_RAPIDS)):
        with cpu_features.simulated(cpu):
            keys[name] = jitflow.compile(kernels.axpb(), "c", cpu_level="native")
    haswell, spr = keys["haswell"], keys["sapphire rapids"]
    assert haswell.options.cpu_level.zig_cpu == "x86_64_v3" and "avx512f" in spr.options.cpu_level.needs
    assert len({haswell.key, spr.key, jitflow.compile(kernels.axpb(), "c").key}) == 3
    with cpu_features.simulated(HASWELL):      # the same CPU list is the same key
        assert jitflow.compile(kernels.axpb(), "c", cpu_level="native").key == haswell.key
    assert jitflow.compile(kernels.axpb(), "c", cpu_level="x86-64-v3").key != haswell.key


# -- an Arm level runs -----------------------------------------------------------------------------

def test_a_neoverse_v2_kernel_runs_under_qemu(cache_dir, tmp_path, zig_cache):
    driver = arm_qemu.build_driver(tmp_path, zig_cache)
    exe = jitflow.compile(kernels.vecadd(256), "c", host=ARM, cpu_level="neoverse-v2")
    lib = exe.export_library(tmp_path / "vecadd_v2.so")
    a, b = np.random.default_rng(3).standard_normal((2, 256)).astype("float32")
    proc, after = arm_qemu.call(driver, lib, [a, b, np.zeros(256, "float32")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(after[2], a + b)
