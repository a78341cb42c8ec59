"""Host builds for another CPU (aarch64 from x86-64): targets, ELF facts, and running under qemu."""
from __future__ import annotations

import arm_qemu
import kernels
import numpy as np
import pytest
from portability import check_portable

import jitflow
from jitflow import cli
from jitflow.errors import LoadError, TargetError
from jitflow.formats import elf as elf_info
from jitflow.formats import library_blob
from jitflow.targets import resolve_target
from jitflow.targets.hosts import SUPPORTED_HOSTS, machine_host

ARM = "aarch64-linux-gnu"


# -- choosing the host --------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["aarch64-linux-gnu", "aarch64-unknown-linux-gnu", "arm64-linux-gnu",
                                  " AArch64-none-linux-gnu ", "arm64", "aarch64", "ARM64"])
def test_host_spellings_resolve_to_one_triple(text):
    assert resolve_target("c", host=text).host == ARM


@pytest.mark.parametrize("text", ["x86_64", "amd64", "X86_64"])
def test_a_bare_x86_64_architecture_is_its_linux_triple(text):
    assert resolve_target("c", host=text).host == "x86_64-linux-gnu"


def test_arm64_is_the_same_library_and_key_as_aarch64_linux_gnu(cache_dir):
    arm64 = jitflow.compile(kernels.axpb(), "c", host="arm64")
    assert arm64.target.host == ARM and arm64.key == jitflow.compile(kernels.axpb(), "c", host=ARM).key


@pytest.mark.parametrize("text, guess", [("riscv64-linux-gnu", None), ("aarch64-linux-musl", ARM),
                                         ("x86_64-windows-msvc", "x86_64-linux-gnu"),
                                         ("armv7-linux-gnueabihf", None), ("arm64-apple-darwin", ARM),
                                         ("riscv64", None), ("", None)])
def test_unsupported_host_lists_the_supported_ones(text, guess):
    with pytest.raises(TargetError) as err:
        resolve_target("c", host=text)
    assert f"unsupported host {text!r}" in str(err.value)
    assert all(h in str(err.value) for h in SUPPORTED_HOSTS)
    assert ("did you mean" in str(err.value)) == (guess is not None)
    if guess:
        assert str(err.value).endswith(f"did you mean {guess!r}?")


@pytest.mark.parametrize("machine, expected", [("x86_64", "x86_64-linux-gnu"), ("aarch64", ARM),
                                                ("arm64", ARM), ("ppc64le", None)])
def test_default_host_is_this_machine(monkeypatch, machine, expected):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    if expected is None:
        with pytest.raises(TargetError, match="ppc64le.*pass host= one of x86_64-linux-gnu, aarch64"):
            resolve_target("c")
    else:
        assert resolve_target("c").host == expected


def test_host_comes_from_a_tvm_target_host():
    import tvm

    arm_llvm = {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host=arm_llvm)
    spec = resolve_target(target)
    assert (spec.host, spec.archs) == (ARM, ("sm_90",))
    assert resolve_target({"kind": "c", "host": arm_llvm}).host == ARM
    assert resolve_target({"kind": "c", "host": ARM}).host == ARM
    assert resolve_target(tvm.target.Target("c", host="c")).host == machine_host()
    with pytest.raises(TargetError, match="disagrees"):
        resolve_target(target, host="x86_64-linux-gnu")
    with pytest.raises(TargetError, match="unsupported host target kind 'cuda'"):
        resolve_target({"kind": "c", "host": {"kind": "cuda"}})


def test_host_is_part_of_the_cache_key(cache_dir):
    keys = {h: jitflow.compile(kernels.vecadd(64), "c", host=h).key for h in SUPPORTED_HOSTS}
    assert len(set(keys.values())) == len(SUPPORTED_HOSTS)
    assert jitflow.compile(kernels.vecadd(64), "c", host="aarch64-unknown-linux-gnu").key == keys[ARM]


def test_jit_refuses_a_library_for_another_cpu(cache_dir):
    foreign = next(h for h in SUPPORTED_HOSTS if h != machine_host())
    exe = jitflow.compile(kernels.vecadd(64), "c", host=foreign)
    article = "an"            # an aarch64-linux-gnu machine, an x86_64-linux-gnu machine (never "a aarch64")
    with pytest.raises(LoadError, match=f"built for {foreign}.*export_library.* on {article} {foreign} machine"):
        exe.jit()
    assert not cache_dir.exists() or not any(cache_dir.rglob("lib.so"))   # refused before building


# -- what an aarch64 build contains -------------------------------------------------------------

def test_cpu_module_builds_for_aarch64(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.libm_calls_f64(), "c", host=ARM)
    info = elf_info.read(exe.export_library(tmp_path / "libm_arm.so"))
    check_portable(info, "aarch64")
    assert "libm.so.6" in info.needed and info.glibc_baseline is None   # unversioned: bound at load time
    host_c = (exe.build_info.library.parent / "src" / "host.c").read_text()
    assert '"keys":["arm_cpu","cpu"]' in host_c.splitlines()[0]       # TVM lowered for an Arm CPU
    assert exe.target.describe() == f"c for {ARM}" or machine_host() == ARM


def test_cuda_module_builds_for_aarch64(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", host=ARM)
    out = exe.export_library(tmp_path / "vecadd_gh200.so")
    check_portable(elf_info.read(out), "aarch64")
    blob = library_blob.parse(library_blob.blob_of(out))
    (cuda,) = [library_blob.parse_cuda_payload(m.payload) for m in blob.modules if m.kind == "cuda"]
    assert cuda.fmt == "fatbin" and [k.name for k in cuda.kernels] == ["main_kernel"]


def test_cli_builds_for_aarch64(cache_dir, tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text("import kernels\nMod = kernels.vecadd(64)\n")
    out = tmp_path / "k.so"
    assert cli.main(["build", f"{model}:Mod", "--target", "c", "--host", ARM, "-o", str(out)]) == 0
    assert (elf_info.read(out).machine, elf_info.read(out).elf_class) == ("aarch64", 64)
    assert cli.main(["build", f"{model}:Mod", "--target", "c", "--host", "riscv64-linux-gnu",
                     "-o", str(tmp_path / "r.so")]) == 2
    err = capsys.readouterr().err
    assert "unsupported host 'riscv64-linux-gnu'" in err and ARM in err


# -- running the aarch64 kernels under qemu -----------------------------------------------------

@pytest.fixture(scope="module")
def arm_driver(tmp_path_factory, zig_cache):
    """The C test driver built for aarch64, and how to run it under qemu."""
    return arm_qemu.build_driver(tmp_path_factory.mktemp("driver"), zig_cache)


def test_aarch64_kernels_run_under_qemu(cache_dir, tmp_path, arm_driver):
    rng = np.random.default_rng(0)
    a, b = rng.random((32, 32), "float32"), rng.random((32, 32), "float32")
    x = rng.random(64, "float32") + 0.5
    promising = kernels.matmul(32)["main"].with_attr("tirx.noalias", True)   # computes with restrict buffers
    cases = [(kernels.matmul(32), [a, b, np.zeros((32, 32), "float32")], a @ b),
             (promising, [a, b, np.zeros((32, 32), "float32")], a @ b),
             (kernels.libm_calls(), [x, np.zeros(64, "float32")], np.exp(x) + np.log(x) + x ** 1.5)]
    for n, (mod, arrays, expected) in enumerate(cases):
        lib = jitflow.compile(mod, "c", host=ARM).export_library(tmp_path / f"k{n}.so")
        proc, after = arm_qemu.call(arm_driver, lib, arrays, tmp_path)
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(after[-1], expected, rtol=1e-5)


def test_the_qemu_recipe_of_the_shipping_doc_runs_as_written(cache_dir, zig_cache, tmp_path):
    """docs/shipping.md's commands, run in turn in a folder holding ffi_driver.c and the vector add
    it names: the driver built, the inputs written, one call under qemu, C = A + B printed."""
    jitflow.compile(kernels.vecadd(1024), "c", host=ARM).export_library(tmp_path / "vecadd_arm_cpu.so")
    lines = arm_qemu.recipe()
    proc = arm_qemu.run_recipe(lines, tmp_path, zig_cache)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == arm_qemu.printed(lines) == "ok 3\n[3. 3. 3. 3.]\n"


def test_aarch64_kernel_errors_reach_the_caller_under_qemu(cache_dir, tmp_path, arm_driver):
    lib = jitflow.compile(kernels.axpb(2.0, 64), "c", host=ARM).export_library(tmp_path / "axpb.so")
    proc, (_, c) = arm_qemu.call(arm_driver, lib, [np.ones(32, "float32"), np.zeros(64, "float32")], tmp_path)
    assert proc.returncode == 2
    assert "ValueError: Invalid A.shape[0]" in proc.stderr and "expected 64" in proc.stderr
    assert not c.any()   # nothing was written
