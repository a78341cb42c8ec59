"""The cache keys of a fixed set of builds, printed as JSON (`python key_probe.py`), for comparing the
keys one lock file gives under two Python versions: kernels and a Relax model with TVM's default
pipelines (CPU and CUDA), a pass_config, and pipelines a user registers (a TIR pipeline of each kind
bound_pipelines makes, one holding a dataclass with an enum, a Relax pipeline by name)."""
from __future__ import annotations

import json
import sys
from typing import Any


def probe() -> dict[str, dict[str, Any]]:
    """name -> {"key", "uncacheable", "inputs"} of each build; what it registers is undone after."""
    import bound_pipelines
    import kernels
    import models
    import tvm
    from tvm.relax.pipeline import PIPELINE_MAP as RELAX
    from tvm.tirx.compilation_pipeline import PIPELINE_MAP as TIR

    import jitflow

    out: dict[str, dict[str, Any]] = {}

    def key(name: str, mod: Any, target: str = "c", **kw: Any) -> None:
        k = jitflow.compile(mod, target, **kw).cache_key
        out[name] = {"key": k.digest, "uncacheable": k.uncacheable, "inputs": k.inputs}

    key("cpu kernel", kernels.vecadd())
    key("cpu kernel, pass_config", kernels.vecadd(), pass_config={"tirx.disable_cse_tir": True})
    key("cuda kernel (nvrtc)", kernels.vecadd_cuda(), "cuda", arch="sm_90")
    key("relax model, default pipelines", models.mlp())
    key("relax model, default pipelines, cuda", models.mlp(), "cuda", arch="sm_90")
    default = TIR["s_tir"]
    try:
        for kind in bound_pipelines.KINDS:
            tvm.tirx.register_tir_pipeline("s_tir", bound_pipelines.make(kind, 7.0))
            key(f"tir pipeline: {kind}", kernels.axpb(4300.0))
        tvm.tirx.register_tir_pipeline("s_tir", bound_pipelines.everything(5.0))
        key("tir pipeline: object holding a dataclass", kernels.axpb(4300.0))
    finally:
        TIR["s_tir"] = default
    RELAX["jitflow_probe"] = bound_pipelines.zero_then_fold
    try:
        key("relax pipeline: registered by name", models.mlp(), relax_pipeline="jitflow_probe")
    finally:
        del RELAX["jitflow_probe"]
    return out


if __name__ == "__main__":
    json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "keys": probe()}, sys.stdout)
