"""What a target says that jitflow uses, read one way: the CPU level an llvm target's mcpu (or a CUDA
target's llvm host's mcpu) names decides the build's CPU level and key, whatever the spelling."""
from __future__ import annotations

import kernels
import pytest
import tvm

import jitflow
from jitflow.errors import TargetError
from jitflow.targets.reading import read
from jitflow.targets.spec import resolve_target

V3 = {"kind": "llvm", "mcpu": "x86-64-v3"}


@pytest.mark.parametrize("target", [V3, '{"kind": "llvm", "mcpu": "x86-64-v3"}', "llvm -mcpu=x86-64-v3",
                                    tvm.target.Target(dict(V3, **{"num-cores": 16}))])
def test_an_llvm_targets_mcpu_is_the_cpu_level_in_every_spelling(target):
    reading = read(target)
    assert (reading.kind, reading.cpu_level, reading.host) == ("c", "x86-64-v3", None)


def test_host_and_level_of_cpu_and_cuda_targets():
    arm = read({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-v2"})
    assert (arm.host, arm.cpu_level) == ("aarch64-linux-gnu", "neoverse-v2")
    assert arm.host == resolve_target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"}).host
    cuda = read(tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host=V3))
    assert (cuda.kind, cuda.archs, cuda.cpu_level) == ("cuda", ("sm_90",), "x86-64-v3")
    assert read({"kind": "llvm", "host": "aarch64-linux-gnu"}).host == "aarch64-linux-gnu"
    assert read({"kind": "llvm", "mtriple": "riscv64-unknown-linux-gnu"}).host is None   # resolve_target says why
    assert read("llvm").cpu_level is None and read("c").kind == "c" and read(None).kind is None
    assert read({"kind": "llvm", "mcpu": "znver4"}).cpu_level is None       # an LLVM model: the baseline


def test_compile_builds_at_the_level_the_target_names(cache_dir, monkeypatch):
    mod = kernels.matmul(16)
    monkeypatch.setenv("JITFLOW_CPU_LEVEL", "x86-64-v2")                  # the target's mcpu wins over it
    from_target = jitflow.compile(mod, tvm.target.Target(dict(V3, **{"num-cores": 2})))
    assert from_target.options.cpu_level.name == "x86-64-v3"
    assert from_target.key == jitflow.compile(mod, "c", cpu_level="x86-64-v3").key
    with tvm.target.Target(V3):                                             # an entered target is read too
        assert jitflow.compile(mod).key == from_target.key
    assert jitflow.compile(mod, "llvm").options.cpu_level.name == "x86-64-v2"
    with pytest.raises(TargetError, match="disagree"):
        jitflow.compile(mod, V3, cpu_level="x86-64-v4")
    assert jitflow.compile(mod, V3, cpu_level="X86_64_V3").key == from_target.key
