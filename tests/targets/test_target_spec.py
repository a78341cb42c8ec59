"""Resolving a CUDA target: TVM's canonical config, reached without tvm_ffi's slow conversion path."""
from __future__ import annotations

import abc

import jitflow
from jitflow.targets import resolve_target


def test_the_canonical_config_is_tvms_export():
    import tvm

    spec = resolve_target({"kind": "cuda", "max_num_threads": 512}, arch="sm_80")
    expected = dict(tvm.target.Target({"kind": "cuda", "arch": "sm_80", "max_num_threads": 512}).export())
    expected.pop("host", None)
    assert spec.config["arch"] == "sm_80" and spec.config["max_num_threads"] == 512
    assert set(spec.config) == set(expected)
    plain, spelled = resolve_target("cuda", arch="sm_80"), resolve_target({"kind": "cuda"}, arch="sm_80")
    assert plain.canonical() == spelled.canonical()


def test_resolving_a_target_walks_no_abstract_base_class(monkeypatch):
    # a dict handed to tvm_ffi.convert is checked against numbers.Number first: in a process with
    # torch that walks hundreds of registered number types, on every cache hit's path
    import numbers

    class Fresh(abc.ABC):
        pass

    Fresh.register(type("Registered", (), {}))   # any registration invalidates every ABC's negative cache
    walks = []
    original = abc.ABCMeta.__subclasscheck__
    monkeypatch.setattr(abc.ABCMeta, "__subclasscheck__",
                        lambda cls, sub: walks.append((cls, sub)) or original(cls, sub))
    jitflow.compile(_vecadd(), "cuda", arch="sm_90")
    assert not [(cls, sub) for cls, sub in walks if cls is numbers.Number and sub is dict]


def _vecadd():
    import kernels

    return kernels.vecadd_cuda()


def test_compile_takes_the_entered_target_and_the_spellings_tvm_users_type(caplog):
    import logging

    import kernels
    import tvm

    from jitflow import logs

    cpu, gpu = kernels.axpb(5.0), kernels.vecadd_cuda()
    with tvm.target.Target("c"):
        assert jitflow.compile(cpu).target.kind == "c"             # not the default "cuda"
    with tvm.target.Target({"kind": "cuda", "arch": "sm_86"}):
        assert jitflow.compile(gpu).target.archs == ("sm_86",)
        assert jitflow.compile(cpu, "c").target.kind == "c"        # an explicit target wins
    assert jitflow.compile(gpu, arch="sm_90").target.kind == "cuda"
    assert jitflow.compile(gpu, "CUDA", arch="sm_90").key == jitflow.compile(gpu, "cuda", arch="sm_90").key
    assert jitflow.compile(gpu, {"kind": "CUDA", "arch": "SM_90"}).target.archs == ("sm_90",)
    # TVM's CPU target: built as the C host (the same library and key as "c"), said once
    logs.forget_warnings()
    caplog.set_level(logging.WARNING, "jitflow")
    c_key = jitflow.compile(cpu, "c").key
    for spelling in ("llvm", "LLVM", {"kind": "llvm"}, tvm.target.Target("llvm")):
        assert jitflow.compile(cpu, spelling).key == c_key
    arm = jitflow.compile(cpu, {"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    assert arm.target.host == "aarch64-linux-gnu" and arm.key == jitflow.compile(cpu, "c", host="aarch64-linux-gnu").key
    said = [r.getMessage() for r in caplog.records if "built as the C host" in r.getMessage()]
    assert len(said) == 1 and "Pass 'c'" in said[0]


def test_a_pass_context_entered_around_jit_but_not_compile_is_said_once(cache_dir, caplog):
    import logging

    import kernels
    import tvm

    from jitflow import logs

    logs.forget_warnings()
    caplog.set_level(logging.WARNING, "jitflow")
    late = lambda: [r for r in caplog.records if "entered around jit()" in r.getMessage()]   # noqa: E731
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_vectorize": True}):
        same = jitflow.compile(kernels.axpb(6.0), "c")
        same.jit()                                  # compiled and built in one context: nothing to say
    assert late() == []
    exe = jitflow.compile(kernels.axpb(7.0), "c")
    with tvm.transform.PassContext(opt_level=1):
        exe.jit()
        jitflow.compile(kernels.axpb(8.0), "c", cache=False).export_library(cache_dir.parent / "x.so")
    assert len(late()) == 1 and "Enter it around jitflow.compile()" in late()[0].getMessage()
    assert exe.key == jitflow.compile(kernels.axpb(7.0), "c").key          # built without it


def test_without_a_gpu_the_defaulted_target_says_it_is_cuda_and_how_to_build_for_the_cpu(monkeypatch):
    import pytest

    from jitflow.errors import TargetError
    from jitflow.targets import spec

    monkeypatch.setattr(spec, "visible_gpu_arch", lambda: None)
    with pytest.raises(TargetError) as defaulted:
        jitflow.compile(_vecadd())
    text = str(defaulted.value)
    assert "no target was given, so it is 'cuda' (the default)" in text and "target='c' to build for the CPU" in text
    assert "arch='sm_90'" in text
    for named in ("cuda", {"kind": "cuda"}):     # asked for CUDA: only the arch is missing
        with pytest.raises(TargetError) as asked:
            jitflow.compile(_vecadd(), named)
        assert "no CUDA arch given" in str(asked.value) and "default" not in str(asked.value)
        assert "target='c'" not in str(asked.value)


def test_tvms_spellings_tag_strings_former_string_form_and_target_host():
    import pytest
    import tvm

    from jitflow.errors import InvalidInputError, TargetError

    tagged = resolve_target("nvidia/nvidia-h100")        # what tvm.target.Target("nvidia/nvidia-h100") is
    assert tagged == resolve_target(tvm.target.Target("nvidia/nvidia-h100"))
    assert tagged.archs == ("sm_90a",)
    with pytest.raises(TargetError, match=r"TVM knows no target tag 'nvidia/h100'; its nvidia/ tags: nvidia/"):
        resolve_target("nvidia/h100")
    # TVM's former string form, which TVM 0.27 itself no longer parses
    assert resolve_target("cuda -arch=sm_90").canonical() == resolve_target("cuda", arch="sm_90").canonical()
    threads = resolve_target("cuda -arch=sm_80 -max_num_threads=512")
    assert threads.archs == ("sm_80",) and threads.config["max_num_threads"] == 512
    assert resolve_target("llvm -mtriple=aarch64-linux-gnu").host == "aarch64-linux-gnu"
    with pytest.raises(TargetError, match=r"'arch=sm_90' is not an option of the form -name=value; write"):
        resolve_target("cuda arch=sm_90")
    # target_host= is host=
    gpu = _vecadd()
    arm = jitflow.compile(gpu, "cuda", arch="sm_90", target_host="llvm -mtriple=aarch64-linux-gnu")
    assert arm.target.host == "aarch64-linux-gnu"
    assert arm.key == jitflow.compile(gpu, "cuda", arch="sm_90", host="aarch64-linux-gnu").key
    as_target = tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    assert jitflow.compile(gpu, "cuda", arch="sm_90", target_host=as_target).key == arm.key
    with pytest.raises(TargetError, match="disagrees with target_host="):
        jitflow.compile(gpu, "cuda", arch="sm_90", host="x86_64-linux-gnu", target_host="aarch64-linux-gnu")
    # tir_pipeline=: TVM's default is what runs; another says how to run it
    assert jitflow.compile(gpu, "cuda", arch="sm_90", tir_pipeline="default").key == \
        jitflow.compile(gpu, "cuda", arch="sm_90").key
    with pytest.raises(InvalidInputError, match=r"tir_pipeline='s_tir' is not taken.*register_tir_pipeline\('s_tir'"):
        jitflow.compile(gpu, "cuda", arch="sm_90", tir_pipeline="s_tir")


def test_an_llvm_cpu_option_names_the_jitflow_argument(caplog):
    import logging

    import kernels

    from jitflow import logs

    logs.forget_warnings()
    caplog.set_level(logging.WARNING, "jitflow")
    exe = jitflow.compile(kernels.axpb(5.0), "llvm -mcpu=skylake")
    assert exe.key == jitflow.compile(kernels.axpb(5.0), "c").key
    said = [r.getMessage() for r in caplog.records if "built as the C host" in r.getMessage()]
    assert len(said) == 1 and "-mcpu the CPU level where it names one of jitflow's, as cpu_level= does" in said[0]
    level = [r.getMessage() for r in caplog.records if "mcpu 'skylake' is not one of jitflow's CPU levels" in r.getMessage()]
    assert len(level) == 1 and "pass cpu_level=" in level[0]


def test_a_target_field_of_the_wrong_type_is_a_target_error():
    import pytest

    from jitflow.errors import TargetError

    cases = {'{"kind": ["llvm"]}': "kind must be text", "{}": "names no kind",
             '{"kind": {"cuda": 1}}': "kind must be text", '{"kind": 3}': "kind must be text",
             '{"kind": "cuda", "arch": null}': "arch must be text", '{"kind": "cuda", "arch": {"sm_90": 1}}':
             "arch must be text", '{"kind": "cuda", "arch": true}': "arch must be text"}
    for text, says in cases.items():
        for target in (text, __import__("json").loads(text)):
            with pytest.raises(TargetError, match=says):
                jitflow.compile(_vecadd(), target)
    with pytest.raises(TargetError, match="arch must be text"):
        jitflow.compile(_vecadd(), "cuda", arch=9.0)
