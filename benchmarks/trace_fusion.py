"""The traced half of docs/inspect.md's example: one MLP, fused and unfused, traced on the GPU.

    python benchmarks/trace_fusion.py

Needs a GPU, TVM with its compiler and cupti-python. Each build is traced in its own process, so
that TVM's pooled allocator starts empty as in a fresh program; prints each trace (the figures for
the traced example in docs/inspect.md).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''
import numpy as np
import tvm
from tvm import relax
from tvm.relax.backend.cuda import pipeline as cuda
from tvm.script import ir as I
from tvm.script import relax as R

import jitflow


@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((8, 64), "float32"), w1: R.Tensor((64, 128), "float32"), b1: R.Tensor((128,), "float32"),
             w2: R.Tensor((128, 10), "float32"), b2: R.Tensor((10,), "float32")) -> R.Tensor((8, 10), "float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            y = R.add(R.matmul(h, w2), b2)
            R.output(y)
        return y


rng = np.random.default_rng(0)
weights = {"w1": rng.standard_normal((64, 128), dtype="float32"), "b1": rng.standard_normal(128, dtype="float32"),
           "w2": rng.standard_normal((128, 10), dtype="float32"), "b2": rng.standard_normal(10, dtype="float32")}
model = relax.transform.BindParams("main", weights)(MLP)


@tvm.transform.module_pass(opt_level=0, name="cuda_default_without_fusion")
def unfused_pipeline(mod, ctx):
    target = tvm.target.Target.current()
    legalize = [p for p in cuda.legalize_passes(target) if p.info.name not in ("FuseOps", "FuseTIR")]
    return tvm.transform.Sequential(cuda.library_dispatch_passes(target) + legalize
                                    + cuda.dataflow_lower_passes(target) + cuda.finalize_passes(target))(mod)


fused = jitflow.compile(model, "cuda", arch="sm_90")
unfused = jitflow.compile(model, "cuda", arch="sm_90", relax_pipeline=unfused_pipeline)
'''

RUN = '''
import sys, numpy as np, tvm
sys.path.insert(0, {folder!r})
import mlp_variants
exe = getattr(mlp_variants, {name!r})
x = tvm.runtime.tensor(np.ones((8, 64), "float32"), device=tvm.runtime.device("cuda", 0))
print(exe.trace("main", x, calls=3))
'''


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="trace-fusion-"))
    (folder / "mlp_variants.py").write_text(MODEL)
    for name in ("fused", "unfused"):
        code = RUN.format(folder=str(folder), name=name)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)})
        print(f"==== {name} (exit {proc.returncode})")
        print(proc.stdout)
        if proc.returncode:
            print(proc.stderr[-3000:])


if __name__ == "__main__":
    main()
