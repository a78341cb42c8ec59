"""Relax models the tests build: written once here so that test files and subprocesses share them.

The weights and the numpy reference need only numpy, so a runtime-only TVM install can check
an exported model against them.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def mlp_weights(d_in: int = 16, hidden: int = 32, d_out: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """The MLP's parameters, reproducible from the seed."""
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((d_in, hidden)) / np.sqrt(d_in)).astype("float32"),
        "b1": rng.standard_normal(hidden).astype("float32"),
        "w2": (rng.standard_normal((hidden, d_out)) / np.sqrt(hidden)).astype("float32"),
        "b2": rng.standard_normal(d_out).astype("float32"),
    }


def mlp_unbound(batch: int = 4, d_in: int = 16, hidden: int = 32, d_out: int = 8) -> Any:
    """y = relu(x @ w1 + b1) @ w2 + b2, with the weights as parameters of main."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class MLP:
        @R.function
        def main(x: R.Tensor((batch, d_in), "float32"), w1: R.Tensor((d_in, hidden), "float32"),
                 b1: R.Tensor((hidden,), "float32"), w2: R.Tensor((hidden, d_out), "float32"),
                 b2: R.Tensor((d_out,), "float32")) -> R.Tensor((batch, d_out), "float32"):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, w1), b1))
                y = R.add(R.matmul(h, w2), b2)
                R.output(y)
            return y

    return MLP


def mlp(batch: int = 4, d_in: int = 16, hidden: int = 32, d_out: int = 8, seed: int = 0,
        weights: dict[str, np.ndarray] | None = None) -> Any:
    """The MLP with its weights bound into the module as constants: main(x) only."""
    from tvm import relax

    weights = weights if weights is not None else mlp_weights(d_in, hidden, d_out, seed)
    return relax.transform.BindParams("main", weights)(mlp_unbound(batch, d_in, hidden, d_out))


def mlp_reference(x: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    """The MLP in numpy."""
    h = np.maximum(x @ weights["w1"] + weights["b1"], 0)
    return h @ weights["w2"] + weights["b2"]


def convnet_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """The convnet's parameters: a 3x3 convolution to 8 channels, its bias, and a 512 -> 10 dense layer."""
    rng = np.random.default_rng(seed)
    return {
        "w": (rng.standard_normal((8, 3, 3, 3)) / 5).astype("float32"),
        "b": rng.standard_normal((1, 8, 1, 1)).astype("float32"),
        "fw": (rng.standard_normal((512, 10)) / 20).astype("float32"),
        "fb": rng.standard_normal(10).astype("float32"),
    }


def convnet(batch: int = 2, seed: int = 0, weights: dict[str, np.ndarray] | None = None) -> Any:
    """y = dense(maxpool2x2(relu(conv3x3(x) + b))) on 3x16x16 images, with the weights bound as constants."""
    from tvm import relax
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class ConvNet:
        @R.function
        def main(x: R.Tensor((batch, 3, 16, 16), "float32"), w: R.Tensor((8, 3, 3, 3), "float32"),
                 b: R.Tensor((1, 8, 1, 1), "float32"), fw: R.Tensor((512, 10), "float32"),
                 fb: R.Tensor((10,), "float32")) -> R.Tensor((batch, 10), "float32"):
            with R.dataflow():
                c = R.nn.relu(R.add(R.nn.conv2d(x, w, padding=(1, 1)), b))
                p = R.nn.max_pool2d(c, pool_size=(2, 2), strides=(2, 2))
                y = R.add(R.matmul(R.reshape(p, (batch, 512)), fw), fb)
                R.output(y)
            return y

    return relax.transform.BindParams("main", weights if weights is not None else convnet_weights(seed))(ConvNet)


def convnet_reference(x: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    """The convnet in numpy."""
    n = x.shape[0]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))   # n, 3, 16, 16, 3, 3
    c = np.maximum(np.einsum("nchwij,ocij->nohw", windows, weights["w"]) + weights["b"], 0)
    p = c.reshape(n, 8, 8, 2, 8, 2).max(axis=(3, 5))
    return p.reshape(n, 512) @ weights["fw"] + weights["fb"]


def symbolic_mlp() -> Any:
    """relu(x @ w) * 2 for x of shape (n, 16): storage sizes that depend on n."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Symbolic:
        @R.function
        def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")) -> R.Tensor(("n", 8), "float32"):
            with R.dataflow():
                y = R.nn.relu(R.matmul(x, w))
                z = R.add(y, y)
                R.output(z)
            return z

    return Symbolic


def two_symbols() -> Any:
    """relu(x) + 1 and its sum over rows, for x of shape (n, s): sizes in two shape symbols."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class TwoSymbols:
        @R.function
        def main(x: R.Tensor(("n", "s"), "float32")) -> R.Tensor(("s",), "float32"):
            with R.dataflow():
                y = R.add(R.nn.relu(x), R.const(1.0, "float32"))
                z = R.sum(R.multiply(y, y), axis=0)
                R.output(z)
            return z

    return TwoSymbols


def cuda_pipeline(fuse: bool = True, plan: bool = True) -> Any:
    """TVM's default CUDA pipeline, optionally without operator fusion (FuseOps, FuseTIR) or without
    static memory planning (StaticPlanBlockMemory): the same model before and after one optimization."""
    import tvm
    from tvm.relax.backend.cuda import pipeline as cuda

    @tvm.transform.module_pass(opt_level=0, name=f"cuda_default_fuse{int(fuse)}_plan{int(plan)}")
    def _pipeline(mod: Any, _ctx: Any) -> Any:
        target = tvm.target.Target.current()
        legalize = [p for p in cuda.legalize_passes(target) if fuse or p.info.name not in ("FuseOps", "FuseTIR")]
        finalize = [p for p in cuda.finalize_passes(target) if plan or p.info.name != "StaticPlanBlockMemory"]
        return tvm.transform.Sequential(cuda.library_dispatch_passes(target) + legalize
                                        + cuda.dataflow_lower_passes(target) + finalize)(mod)

    return _pipeline
