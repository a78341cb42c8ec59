"""Resolving a CUDA target: TVM's canonical config, reached without tvm_ffi's slow conversion path."""
from __future__ import annotations

import abc

import jitflow
from jitflow.target import resolve_target


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
