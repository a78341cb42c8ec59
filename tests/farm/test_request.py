"""What travels to a build farm's worker, and the worker's side, without a cluster: the request is
plain JSON (TVM's JSON for the IR, weights apart), the worker rebuilds the same key, refuses another
one, and what cannot travel is named."""
from __future__ import annotations

import json

import instruments
import kernels
import models
import numpy as np
import pytest
import tvm

import jitflow
from jitflow.cache.wire import entry_format
from jitflow.farm import request, worker


def _wire_round_trip(req: request.Request) -> dict:
    return json.loads(json.dumps(req.wire))     # only plain data travels


def test_a_request_is_json_and_the_worker_rebuilds_the_same_key(cache_dir):
    exe = jitflow.compile(kernels.axpb(700.0), "c", pass_config={"tirx.disable_vectorize": True}, name="axpb 700")
    req = request.make(exe, str(cache_dir / "v1"))
    wire = _wire_round_trip(req)
    assert req.weights == {} and wire["key"] == exe.key
    again = request.executable(wire, [])
    assert again.key == exe.key and again.options.label == "axpb 700" and again.settings.build_jobs == 1


def test_the_callers_pass_context_travels_as_data(cache_dir):
    with tvm.transform.PassContext(opt_level=2, disabled_pass=["tirx.UnrollLoop"],
                                   config={"tirx.disable_vectorize": True}):
        exe = jitflow.compile(kernels.axpb(706.0), "c")
    wire = _wire_round_trip(request.make(exe, str(cache_dir / "v1")))
    assert wire["pass_context"]["disabled"] == ["tirx.UnrollLoop"] and wire["pass_context"]["opt_level"] == 2
    assert request.executable(wire, []).key == exe.key != jitflow.compile(kernels.axpb(706.0), "c").key


def test_a_models_weights_travel_apart_once_and_come_back(cache_dir):
    weights = models.mlp_weights(d_in=64, hidden=64)
    exes = [jitflow.compile(models.mlp(d_in=64, hidden=64), "c", pass_config={"relax.FuseOps.max_depth": depth})
            for depth in (2, 3)]
    reqs = [request.make(exe, str(cache_dir / "v1")) for exe in exes]
    w1 = weights["w1"].astype("float32").tobytes()
    assert any(w1 in data for data in reqs[0].weights.values())            # the tensor, by its sha256
    assert list(reqs[0].weights) == list(reqs[1].weights)                  # the same for every candidate
    whole = len(tvm.ir.save_json(exes[0].mod))
    assert len(json.dumps(reqs[0].wire)) < whole - len(w1)                 # not inside the request
    for exe, req in zip(exes, reqs):
        again = request.executable(_wire_round_trip(req), list(req.weights.values()))
        assert again.key == exe.key


def test_what_cannot_travel_is_named(cache_dir):
    with instruments.context(instruments.Record()):
        watched = jitflow.compile(kernels.axpb(701.0), "c")
    with pytest.raises(request.NotPortable, match="instruments"):
        request.make(watched, str(cache_dir))
    own_pass = jitflow.compile(models.mlp(), "c", relax_pipeline=tvm.relax.get_pipeline("zero"))
    with pytest.raises(request.NotPortable, match="Pass object"):
        request.make(own_pass, str(cache_dir))
    with pytest.raises(request.NotPortable, match="caching is off"):
        request.make(jitflow.compile(kernels.axpb(702.0), "c", cache=False), str(cache_dir))


def test_the_worker_builds_in_its_cache_and_hands_back_checked_bytes(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.axpb(703.0), "c")
    wire = _wire_round_trip(request.make(exe, str(tmp_path / "elsewhere")))
    reply = worker.run(wire)
    assert reply["ok"] and reply["outcome"] == "built" and not reply["in_place"]
    meta, files = entry_format.unpack(reply["entry"], exe.key, None)
    assert meta["key"] == exe.key and files["lib.so"] == (cache_dir / "v1" / "entries" / exe.key[:2] / exe.key /
                                                         "lib.so").read_bytes()
    same_cache = _wire_round_trip(request.make(exe, str(cache_dir / "v1")))
    in_place = worker.run(same_cache)          # the caller's own cache on this machine: nothing to send
    assert in_place["ok"] and in_place["outcome"] == "hit" and in_place["in_place"] and "entry" not in in_place
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
    np.testing.assert_allclose(c.numpy(), 704.0)


def test_a_worker_whose_key_differs_refuses_and_says_where(cache_dir):
    exe = jitflow.compile(kernels.axpb(705.0), "c")
    wire = _wire_round_trip(request.make(exe, str(cache_dir / "v1")))
    wire["inputs"]["versions"]["zig"] = "0.0.1"
    wire["key"] = "f" * 64
    reply = worker.run(wire)
    assert not reply["ok"] and reply["refused"] and reply["error_type"] == "KeyMismatchError"
    assert "versions.zig: here 0." in reply["error"] and "in the caller 0.0.1)" in reply["error"]
    assert not exe.cached()                                 # nothing was built under either key


BAD_IR = """
    import json, kernels, jitflow
    from jitflow.farm import request, worker
    wire = json.loads(json.dumps(request.make(jitflow.compile(kernels.axpb(701.0), "c"), "/nowhere").wire))
    graph = json.loads(wire["ir"])
    nodes = graph["nodes"]
    imm = next(i for i, n in enumerate(nodes) if n["type"] == "ir.IntImm")
    array = next(i for i, n in enumerate(nodes) if n["type"] == "ffi.Array" and n["data"])
    chain = [{{"type": "ffi.Array", "data": []}}] + [{{"type": "ffi.Array", "data": [i]}} for i in range(5000)]
    cases = {{
        "array holds itself": lambda g: g["nodes"][array].update(data=[array]),
        "field refers to itself": lambda g: g["nodes"][imm]["data"].update(value=imm),
        "field refers ahead": lambda g: g["nodes"][imm]["data"].update(value=len(g["nodes"]) - 1),
        "index past the end": lambda g: g["nodes"][array].update(data=[10 ** 9]),
        "a chain 5000 deep": lambda g: g.update(nodes=chain, root_index=len(chain) - 1),
        "root past the end": lambda g: g.update(root_index=len(g["nodes"])),
        "unknown type": lambda g: g["nodes"][imm].update(type="no.SuchType"),
    }}
    replies = {{}}
    for name, change in cases.items():
        bad = json.loads(json.dumps(graph))
        change(bad)
        reply = worker.run(dict(wire, ir=json.dumps(bad)))
        replies[name] = [reply["ok"], reply.get("error_type"), reply.get("error", "")]
    print(json.dumps(replies))
"""


def test_a_request_whose_ir_refers_to_itself_is_an_error_reply_not_a_dead_worker(cache_dir):
    from conftest import run_python

    replies = json.loads(run_python(BAD_IR.format()).stdout.splitlines()[-1])   # the worker lived to print them
    says = {"array holds itself": "refers to itself", "field refers to itself": "(ir.IntImm) refers to itself",
            "field refers ahead": "refers to node", "index past the end": "refers to node 1000000000",
            "a chain 5000 deep": "ends a chain of 1001 references, more than 1000",
            "root past the end": "is not one of its", "unknown type": "'no.SuchType', which this TVM does not know"}
    for name, words in says.items():
        ok, kind, error = replies[name]
        assert not ok and kind == "InvalidInputError" and words in error, (name, replies[name])
        assert error.startswith("refusing a build request whose IR TVM could not read safely")
