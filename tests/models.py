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
