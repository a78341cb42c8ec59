"""On a GPU: the trace of a Relax MLP and of a convnet against their reports (the start-up upload is
the weights' bytes; each call launches the report's kernels), TVM's pooled allocator seen at work,
and the trace of a kernel library. Each model runs in a fresh process, so that the process-wide
pool starts empty; every assertion message carries the trace's text."""
from __future__ import annotations

import json

import pytest
from conftest import run_python

pytestmark = pytest.mark.gpu

TRACE_MODEL = """
    import json, numpy as np, tvm, jitflow, models
    make = {"mlp": (models.mlp, models.mlp_weights, models.mlp_reference, (4, 16)),
            "convnet": (models.convnet, models.convnet_weights, models.convnet_reference, (2, 3, 16, 16))}
    build, weights, reference, shape = make[%(model)r]
    w = weights()
    exe = jitflow.compile(build(weights=w), "cuda")              # arch from the visible GPU
    x_np = np.random.default_rng(0).standard_normal(shape).astype("float32")
    x = tvm.runtime.tensor(x_np, device=tvm.runtime.device("cuda", 0))   # on the GPU before the trace
    t = exe.trace("main", x, calls=3)
    rep = exe.inspect()
    with jitflow.trace(rep) as held:                          # the caller keeps each output alive
        vm = exe.vm("cuda")
        outputs = [held.call(vm["main"], x) for _ in range(3)]
    y = outputs[-1].numpy()
    print(json.dumps({"trace": t.to_dict(events=True), "text": str(t), "held": held.to_dict(),
                      "held_text": str(held), "model": rep.model.to_json(),
                      "kernels": [k.name for k in rep.kernels],
                      "weights": int(sum(v.nbytes for v in w.values())),
                      "error": float(np.abs(y - reference(x_np, w)).max())}))
"""


def _traced(model: str, tmp_path_factory, zig_cache) -> dict:
    cache = tmp_path_factory.mktemp(f"trace-{model}")
    proc = run_python(TRACE_MODEL % {"model": model},
                      env={"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=["mlp", "convnet"])
def traced(request, tmp_path_factory, zig_cache):
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed: pip install 'jitflow[trace]'")
    return _traced(request.param, tmp_path_factory, zig_cache)


def test_start_up_uploads_the_weights(traced):
    t, text = traced["trace"], traced["text"]
    upload = t["before"]["copies"].get("host->device", {"bytes": 0, "count": 0})
    assert upload["bytes"] == traced["weights"] == traced["model"]["startup"]["constant_bytes"], text
    assert upload["count"] >= 1, text
    assert t["agreement"]["upload"] == {"expected": traced["weights"], "measured": traced["weights"], "ok": True}, text


def test_each_call_launches_the_reports_kernels(traced):
    t, text = traced["trace"], traced["text"]
    expected = [x["kernel"] for x in traced["model"]["functions"][0]["launches"]]
    assert expected and set(expected) <= set(traced["kernels"]), text
    assert len(t["calls"]) == 3, text
    for call in t["calls"]:
        assert sorted(x["kernel"] for x in call["launches"]) == sorted(expected), text
    assert t["agreement"]["ok"], text
    assert all(c["ok"] for c in t["agreement"]["calls"]) and t["agreement"]["unknown_kernels"] == [], text
    assert traced["error"] < 1e-3                       # and the model computed the right numbers


def test_launch_dims_equal_the_reports(traced):
    t, text = traced["trace"], traced["text"]
    report = {x["kernel"]: (x["grid"], x["block"]) for x in traced["model"]["functions"][0]["launches"]}
    for launch in t["calls"][0]["launches"]:
        assert (launch["grid"], launch["block"]) == report[launch["kernel"]], text


def _outputs(traced) -> int:
    """How many of main's storage blocks hold what it returns."""
    return sum(1 for s in traced["model"]["functions"][0]["storages"] if s["holds_output"])


def test_pooled_allocator_allocates_on_the_first_call_only(traced):
    t, text = traced["trace"], traced["text"]
    storages = traced["model"]["functions"][0]["storages"]
    device = [c["allocations_by_kind"].get("device", {"count": 0})["count"] for c in t["calls"]]
    assert device[0] == len(storages), text               # a fresh pool: one cudaMalloc per storage block
    # the second call runs while the first call's result is still referenced: at most its output
    # blocks are new; from the third call on, the pool serves every block
    assert device[1] <= _outputs(traced) and device[2] == 0, text
    assert all(not c["copies"] for c in t["calls"][1:]), text   # input and output stay on the GPU
    pages = sum(-(-s["bytes"] // 4096) * 4096 for s in storages)
    assert t["calls"][0]["allocations_by_kind"]["device"]["bytes"] == pages, text   # 4 KiB pages of the pool
    assert t["before"]["allocations_by_kind"]["device"]["count"] == len(traced["model"]["startup"]["tensors"]), text


def test_outputs_kept_alive_need_new_blocks(traced):
    held, text = traced["held"], traced["held_text"]
    device = [c["allocations_by_kind"].get("device", {"count": 0})["count"] for c in held["calls"]]
    # the pool holds the first trace's blocks; a call whose earlier outputs are all still held gets
    # its intermediates from the pool and allocates at most its output blocks, and once the spare
    # blocks are taken, holding outputs costs new allocations
    assert all(d <= _outputs(traced) for d in device) and sum(device) >= 1, text
    assert held["agreement"]["ok"], text


KERNEL_TRACE = """
    import json, numpy as np, tvm, jitflow, kernels
    exe = jitflow.compile(kernels.vecadd_cuda(1024, 128), "cuda")
    dev = tvm.runtime.device("cuda", 0)
    a, b, c = (tvm.runtime.tensor(np.ones(1024, "float32"), device=dev) for _ in range(3))
    t = exe.trace("main", a, b, c, calls=2)
    print(json.dumps({"trace": t.to_dict(), "text": str(t)}))
"""


def test_trace_of_a_kernel_library(tmp_path, zig_cache):
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed: pip install 'jitflow[trace]'")
    proc = run_python(KERNEL_TRACE, env={"JITFLOW_CACHE_DIR": str(tmp_path), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)})
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    t, text = out["trace"], out["text"]
    assert [[x["kernel"] for x in c["launches"]] for c in t["calls"]] == [["main_kernel"]] * 2, text
    assert t["calls"][0]["launches"][0]["grid"] == [8, 1, 1] and t["calls"][0]["launches"][0]["block"] == [128, 1, 1]
    assert t["agreement"]["ok"] and t["agreement"]["upload"]["expected"] is None, text
