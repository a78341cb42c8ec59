"""A Relax MLP on the CPU target: build (or hit the cache), run it in a VirtualMachine, check it
against numpy, export it, load the exported library again, and print its storage plan.

Run it twice: the second run is a cache hit and does no lowering or compiling.
"""
import tempfile
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

import jitflow
from jitflow.report import storage_plan

BATCH, D_IN, HIDDEN, D_OUT = 8, 64, 128, 10


@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((BATCH, D_IN), "float32"), w1: R.Tensor((D_IN, HIDDEN), "float32"),
             b1: R.Tensor((HIDDEN,), "float32"), w2: R.Tensor((HIDDEN, D_OUT), "float32"),
             b2: R.Tensor((D_OUT,), "float32")) -> R.Tensor((BATCH, D_OUT), "float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            y = R.add(R.matmul(h, w2), b2)
            R.output(y)
        return y


def main() -> None:
    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((D_IN, HIDDEN)).astype("float32") / 8,
               "b1": rng.standard_normal(HIDDEN).astype("float32"),
               "w2": rng.standard_normal((HIDDEN, D_OUT)).astype("float32") / 11,
               "b2": rng.standard_normal(D_OUT).astype("float32")}
    model = relax.transform.BindParams("main", weights)(MLP)   # the weights become part of the module

    exe = jitflow.compile(model, "c")
    start = time.perf_counter()
    vm = exe.vm("cpu")
    elapsed = time.perf_counter() - start
    x = rng.standard_normal((BATCH, D_IN)).astype("float32")
    y = vm["main"](tvm.runtime.tensor(x)).numpy()
    expected = np.maximum(x @ weights["w1"] + weights["b1"], 0) @ weights["w2"] + weights["b2"]
    ok = np.allclose(y, expected, rtol=1e-5, atol=1e-5)
    info = exe.build_info
    kind = "cache hit" if info.outcome == "hit" else "built (cache miss)"
    print(f"MLP on the CPU: {kind}, VirtualMachine ready in {elapsed * 1000:.1f} ms, key {exe.key[:12]}")
    if info.outcome == "built":
        stages = dict(info.stages, load=elapsed - info.total)   # they add up to the time above
        print("  stages: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in stages.items()))
    print(f"  result {'matches' if ok else 'DOES NOT match'} numpy")

    with tempfile.TemporaryDirectory() as tmp:
        path = exe.export_library(Path(tmp) / "mlp.so")
        again = jitflow.load_vm(path, "cpu")["main"](tvm.runtime.tensor(x)).numpy()
        ok = ok and np.array_equal(again, y)
        print(f"  exported {path.name} ({path.stat().st_size // 1024} KiB) and loaded it back: "
              f"{'same' if np.array_equal(again, y) else 'DIFFERENT'} output")
        print("  " + str(storage_plan(path)).replace("\n", "\n  "))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
