"""On a GPU: the memory plan against what the CUDA driver does. With TVM's naive allocator (each
storage block one cudaMalloc, each release one cudaFree) the most device bytes in use during a call
equal the report's static peak, for a convnet and a transformer layer whose kernels need no
workspace; a CUDA-graph build launches the report's kernels on every call (the captured ones
replayed), allocates its cached storage once, and its trace agrees with its report; a trace's
timeline is valid Chrome trace JSON. Each model runs in a fresh process."""
from __future__ import annotations

import json

import chrome_events
import pytest
from conftest import ROOT, run_python

pytestmark = pytest.mark.gpu

PLAN = """
    import json, sys, numpy as np, tvm, jitflow, models
    sys.path.insert(0, %(benchmarks)r)
    import nn_models
    which = %(model)r
    config = {"relax.backend.use_cuda_graph": True} if which == "graph" else {}
    if which == "transformer":
        m = nn_models.transformer_layer()
        mod, shape, fn = m.mod, m.input_shape, "forward"
    else:
        mod, shape, fn = models.convnet(), (2, 3, 16, 16), "main"
    exe = jitflow.compile(mod, "cuda", pass_config=config)          # arch from the visible GPU
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"),
                           device=tvm.runtime.device("cuda", 0))
    t = exe.trace(fn, x, calls=3, memory_cfg="naive")
    rep = exe.inspect()
    print(json.dumps({"trace": t.to_dict(), "text": str(t), "model": rep.model.function(fn).to_json(),
                      "timeline": t.timeline()}))
"""


@pytest.fixture(scope="module", params=["convnet", "transformer", "graph"])
def traced(request, tmp_path_factory, zig_cache):
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed: pip install 'jitflow[trace]'")
    cache = tmp_path_factory.mktemp(f"plan-{request.param}")
    proc = run_python(PLAN % {"model": request.param, "benchmarks": str(ROOT / "benchmarks")},
                      env={"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
    return request.param, json.loads(proc.stdout.strip().splitlines()[-1])


def test_naive_allocator_peak_equals_the_static_peak(traced):
    which, out = traced
    plan, t, text = out["model"], out["trace"], out["text"]
    assert plan["workspaces"] == [] and plan["peak_bytes"] is not None, text     # no workspace: blocks only
    calls = t["calls"] if which != "graph" else t["calls"][1:]    # a graph's first call also allocates its cache
    assert [c["peak_in_use"] for c in calls] == [plan["peak_bytes"]] * len(calls), text
    assert t["agreement"]["ok"], text


def test_cuda_graph_storage_is_allocated_once_and_kernels_replayed(traced):
    which, out = traced
    if which != "graph":
        pytest.skip("the CUDA-graph build only")
    plan, t, text = out["model"], out["trace"], out["text"]
    per_call, cached = plan["per_call"]["storage_bytes"], plan["per_call"]["cached_bytes"]
    assert cached > 0 and plan["per_call"]["replayed"] >= 1, text
    device = [c["allocations_by_kind"].get("device", {"bytes": 0})["bytes"] for c in t["calls"]]
    assert device[0] >= per_call + cached and device[1:] == [per_call, per_call], text
    expected = sorted(x["kernel"] for x in plan["launches"])
    for call in t["calls"]:
        assert sorted(x["kernel"] for x in call["launches"]) == expected, text    # replayed ones too
    assert t["agreement"]["ok"] and all(not c["replayed"] for c in t["agreement"]["calls"]), text


def test_a_traces_timeline_is_valid(traced):
    _, out = traced
    events = chrome_events.check(out["timeline"])
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert len(kernels) == sum(len(c["launches"]) for c in out["trace"]["calls"]) + \
        len(out["trace"]["before"]["launches"]) + len(out["trace"]["between"]["launches"])
    assert chrome_events.counter_max(events) >= max(c["peak_in_use"] for c in out["trace"]["calls"])
