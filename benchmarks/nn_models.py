"""Real models written with tvm.relax.frontend.nn, for benchmarks and end-to-end tests (torch-free).

- `resnet18(image)`: ResNet-18 (four stages of two basic blocks, batch norm folded into the
  convolutions as in inference), on NCHW images.
- `mobilenet_v2(image)`: MobileNetV2 (inverted residual blocks with depthwise convolutions, ReLU6).
- `transformer_layer(seq, d, heads, ff)`: a pre-norm transformer encoder layer with causal
  attention: the mask writes -inf above the diagonal before the softmax.
- `topk_head(d, n, k)`: a linear layer, a softmax and a top-k (values and indices), the shape of a
  classifier that reports its k best classes.

Every builder returns a `Model`: the Relax IRModule with its weights bound as constants (function
`forward`, one input), the weights as numpy arrays, the input shape, and a random input. The
transformer and the top-k head also have numpy references (`*_reference`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class Model:
    """A Relax module with bound weights: `forward(x)`."""

    name: str
    mod: Any
    weights: dict[str, np.ndarray]
    input_shape: tuple[int, ...]

    def example_input(self, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(self.input_shape).astype("float32")


def _nn():
    from tvm.relax.frontend import nn

    return nn


def _wrap(expr: Any, name: str) -> Any:
    from tvm.relax.frontend.nn.core import wrap_nested

    return wrap_nested(expr, name)


def _export(name: str, module: Any, input_shape: tuple[int, ...], seed: int,
            init: Callable[[str, tuple[int, ...], np.random.Generator], np.ndarray]) -> Model:
    import tvm
    from tvm import relax

    nn = _nn()
    mod, params = module.export_tvm(spec={"forward": {"x": nn.spec.Tensor(input_shape, "float32")}})
    rng = np.random.default_rng(seed)
    weights = {n: init(n, tuple(int(s) for s in p.shape), rng).astype(p.dtype) for n, p in params}
    bound = relax.transform.BindParams("forward", {n: tvm.runtime.tensor(w) for n, w in weights.items()})(mod)
    return Model(name, bound, weights, input_shape)


def _he(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """He-scaled weights keep activations in range through deep stacks; biases small."""
    if len(shape) == 1:
        return rng.standard_normal(shape) * 0.05
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)


# -- convolutional models ----------------------------------------------------------------------

def _conv(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1):
    return _nn().Conv2D(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=True)


def _max_pool(x: Any) -> Any:
    from tvm import relax

    return _wrap(relax.op.nn.max_pool2d(x._expr, pool_size=3, strides=2, padding=1), "max_pool")


def _global_pool(x: Any) -> Any:
    from tvm import relax

    return _wrap(relax.op.mean(x._expr, axis=[2, 3]), "global_pool")


def _relu6(x: Any) -> Any:
    from tvm import relax

    return _wrap(relax.op.clip(x._expr, 0.0, 6.0), "relu6")


def resnet18(image: int = 224, classes: int = 1000, width: int = 64, seed: int = 0) -> Model:
    """ResNet-18 on a 1x3ximagexi image (batch norm folded into each convolution's bias)."""
    nn = _nn()

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            self.conv1, self.conv2 = _conv(cin, cout, 3, stride), _conv(cout, cout, 3)
            self.down = _conv(cin, cout, 1, stride) if stride != 1 or cin != cout else None

        def forward(self, x):
            y = self.conv2(nn.op.relu(self.conv1(x)))
            return nn.op.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet18(nn.Module):
        def __init__(self):
            widths = [width, width * 2, width * 4, width * 8]
            self.stem = _conv(3, width, 7, 2)
            blocks, cin = [], width
            for n, cout in enumerate(widths):
                blocks += [Block(cin, cout, 1 if n == 0 else 2), Block(cout, cout, 1)]
                cin = cout
            self.blocks = nn.ModuleList(blocks)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = _max_pool(nn.op.relu(self.stem(x)))
            for block in self.blocks:
                x = block(x)
            return self.fc(_global_pool(x))

    return _export("resnet18", ResNet18(), (1, 3, image, image), seed, _he)


def mobilenet_v2(image: int = 224, classes: int = 1000, width: float = 1.0, seed: int = 0) -> Model:
    """MobileNetV2 on a 1x3ximagexi image (batch norm folded)."""
    nn = _nn()
    # (expansion, output channels, repeats, first stride), as in the MobileNetV2 paper
    stages = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
              (6, 320, 1, 1)]

    def ch(c: int) -> int:
        return max(8, int(c * width + 4) // 8 * 8)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int):
            hidden = cin * expand
            self.expand = _conv(cin, hidden, 1) if expand != 1 else None
            self.depthwise = _conv(hidden, hidden, 3, stride, groups=hidden)
            self.project = _conv(hidden, cout, 1)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = _relu6(self.expand(x)) if self.expand is not None else x
            y = self.project(_relu6(self.depthwise(y)))
            return x + y if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self):
            self.stem = _conv(3, ch(32), 3, 2)
            blocks, cin = [], ch(32)
            for expand, cout, repeats, stride in stages:
                for n in range(repeats):
                    blocks.append(InvertedResidual(cin, ch(cout), stride if n == 0 else 1, expand))
                    cin = ch(cout)
            self.blocks = nn.ModuleList(blocks)
            self.head = _conv(cin, 1280, 1)
            self.fc = nn.Linear(1280, classes)

        def forward(self, x):
            x = _relu6(self.stem(x))
            for block in self.blocks:
                x = block(x)
            return self.fc(_global_pool(_relu6(self.head(x))))

    return _export("mobilenet_v2", MobileNetV2(), (1, 3, image, image), seed, _he)


# -- a transformer layer and a top-k head --------------------------------------------------------

def _causal_mask(scores: Any) -> Any:
    """scores[..., i, j] for j <= i, -inf above the diagonal (a TIR Select against a -inf literal)."""
    from tvm import te, tirx

    def mask(x):
        return te.compute(x.shape, lambda b, h, i, j: tirx.Select(j > i, tirx.const(-math.inf, "float32"),
                                                                  x[b, h, i, j]), name="causal_mask")

    return _nn().op.tensor_expr_op(mask, "causal_mask", [scores])


def transformer_layer(seq: int = 8, d: int = 32, heads: int = 4, ff: int = 64, batch: int = 1,
                      seed: int = 0) -> Model:
    """x + attention(norm(x)), then + mlp(norm(...)): causal multi-head attention, GELU MLP."""
    nn = _nn()

    class EncoderLayer(nn.Module):
        def __init__(self):
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            hd = d // heads
            qkv = nn.op.reshape(self.qkv(self.ln1(x)), (batch, seq, 3, heads, hd))
            q, k, v = (nn.op.reshape(t, (batch, seq, heads, hd)) for t in nn.op.split(qkv, 3, axis=2))
            q, v = nn.op.permute_dims(q, [0, 2, 1, 3]), nn.op.permute_dims(v, [0, 2, 1, 3])
            k = nn.op.permute_dims(k, [0, 2, 3, 1])
            att = nn.op.softmax(_causal_mask(nn.op.matmul(q, k) * (1.0 / math.sqrt(hd))), axis=-1)
            o = nn.op.reshape(nn.op.permute_dims(nn.op.matmul(att, v), [0, 2, 1, 3]), (batch, seq, d))
            x = x + self.out(o)
            return x + self.fc2(nn.op.gelu(self.fc1(self.ln2(x))))

    def init(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if name.endswith(("ln1.weight", "ln2.weight")):
            return 1.0 + 0.1 * rng.standard_normal(shape)
        return rng.standard_normal(shape) * (0.05 if len(shape) == 1 else 1.0 / math.sqrt(shape[-1]))

    return _export("transformer_layer", EncoderLayer(), (batch, seq, d), seed, init)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def transformer_reference(model: Model, x: np.ndarray, heads: int = 4) -> np.ndarray:
    """The transformer layer in numpy (float64), from the model's weights."""
    w = {k: v.astype("float64") for k, v in model.weights.items()}
    x = x.astype("float64")
    batch, seq, d = x.shape
    hd = d // heads

    def linear(name: str, t: np.ndarray) -> np.ndarray:
        return t @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    qkv = linear("qkv", _layer_norm(x, w["ln1.weight"], w["ln1.bias"])).reshape(batch, seq, 3, heads, hd)
    q, k, v = (qkv[:, :, n].transpose(0, 2, 1, 3) for n in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    scores = np.where(np.triu(np.ones((seq, seq), bool), 1), -np.inf, scores)
    o = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
    x = x + linear("out", o)
    h = linear("fc1", _layer_norm(x, w["ln2.weight"], w["ln2.bias"]))
    gelu = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    return x + linear("fc2", gelu)


def topk_head(d: int = 16, n: int = 32, k: int = 5, batch: int = 2, seed: int = 0) -> Model:
    """softmax(x @ W.T + b), then its k largest probabilities and their class indices."""
    nn = _nn()

    class TopK(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(d, n)

        def forward(self, x):
            return nn.op.topk(nn.op.softmax(self.fc(x), axis=-1), k, axis=-1)

    def init(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(shape)

    return _export("topk_head", TopK(), (batch, d), seed, init)


def topk_reference(model: Model, x: np.ndarray, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the k largest probabilities per row, largest first."""
    probs = _softmax(x.astype("float64") @ model.weights["fc.weight"].T.astype("float64")
                     + model.weights["fc.bias"].astype("float64"))
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(probs, order, -1), order
