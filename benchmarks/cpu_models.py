"""Real CPU models for the benchmarks, written with tvm.relax.frontend.nn (torch is not needed):
resnet18, mobilenet_v2 and a transformer encoder layer, with seeded random weights bound into the
module as constants (batch-norm folded into the convolutions' biases, as for inference).

    mod, x = cpu_models.build("resnet18")      # a Relax IRModule with main(x), and an input array
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

MODELS = ("resnet18", "mobilenet_v2", "transformer")


def _nn():
    from tvm import relax
    from tvm.relax.frontend import nn

    return nn, relax


def _resnet18() -> tuple[Any, tuple[int, ...]]:
    nn, relax = _nn()

    class Block(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            self.conv1 = nn.Conv2D(c_in, c_out, 3, stride, 1)
            self.conv2 = nn.Conv2D(c_out, c_out, 3, 1, 1)
            self.down = nn.Conv2D(c_in, c_out, 1, stride, 0) if stride != 1 or c_in != c_out else None

        def forward(self, x):
            y = self.conv2(nn.op.relu(self.conv1(x)))
            return nn.op.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            self.stem = nn.Conv2D(3, 64, 7, 2, 3)
            widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
            self.blocks = nn.ModuleList([b for c_in, c_out, s in widths
                                         for b in (Block(c_in, c_out, s), Block(c_out, c_out, 1))])
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            x = nn.op.relu(self.stem(x))
            x = nn.op.wrap_nested(relax.op.nn.max_pool2d(x._expr, 3, 2, 1), "max_pool")
            for block in self.blocks:
                x = block(x)
            x = nn.op.wrap_nested(relax.op.nn.adaptive_avg_pool2d(x._expr, 1), "avg_pool")
            return self.fc(nn.op.reshape(x, (1, 512)))

    return ResNet18(), (1, 3, 224, 224)


def _mobilenet_v2() -> tuple[Any, tuple[int, ...]]:
    nn, relax = _nn()

    class Inverted(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int, expand: int) -> None:
            hidden = c_in * expand
            self.expand = nn.Conv2D(c_in, hidden, 1) if expand != 1 else None
            self.depthwise = nn.Conv2D(hidden, hidden, 3, stride, 1, groups=hidden)
            self.project = nn.Conv2D(hidden, c_out, 1)
            self.residual = stride == 1 and c_in == c_out

        def forward(self, x):
            y = nn.op.relu6(self.expand(x)) if self.expand is not None else x
            y = self.project(nn.op.relu6(self.depthwise(y)))
            return x + y if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self) -> None:
            self.stem = nn.Conv2D(3, 32, 3, 2, 1)
            blocks, c_in = [], 32
            for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                               (6, 160, 3, 2), (6, 320, 1, 1)]:
                for i in range(n):
                    blocks.append(Inverted(c_in, c, s if i == 0 else 1, t))
                    c_in = c
            self.blocks = nn.ModuleList(blocks)
            self.head = nn.Conv2D(320, 1280, 1)
            self.fc = nn.Linear(1280, 1000)

        def forward(self, x):
            x = nn.op.relu6(self.stem(x))
            for block in self.blocks:
                x = block(x)
            x = nn.op.relu6(self.head(x))
            x = nn.op.wrap_nested(relax.op.nn.adaptive_avg_pool2d(x._expr, 1), "avg_pool")
            return self.fc(nn.op.reshape(x, (1, 1280)))

    return MobileNetV2(), (1, 3, 224, 224)


def _transformer(seq: int = 128, d_model: int = 512, heads: int = 8, ffn: int = 2048) -> tuple[Any, tuple[int, ...]]:
    nn, _ = _nn()
    head_dim = d_model // heads

    class EncoderLayer(nn.Module):
        """Post-norm encoder layer (as torch.nn.TransformerEncoderLayer): attention, then GELU FFN."""

        def __init__(self) -> None:
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.out = nn.Linear(d_model, d_model)
            self.norm1 = nn.LayerNorm(d_model)
            self.fc1 = nn.Linear(d_model, ffn)
            self.fc2 = nn.Linear(ffn, d_model)
            self.norm2 = nn.LayerNorm(d_model)

        def forward(self, x):
            q, k, v = nn.op.split(self.qkv(x), 3, axis=-1)

            def heads_first(t):
                return nn.op.permute_dims(nn.op.reshape(t, (1, seq, heads, head_dim)), [0, 2, 1, 3])

            q, k, v = heads_first(q), heads_first(k), heads_first(v)
            scores = nn.op.matmul(q, nn.op.permute_dims(k, [0, 1, 3, 2])) * (1.0 / head_dim ** 0.5)
            attn = nn.op.matmul(nn.op.softmax(scores, axis=-1), v)
            attn = nn.op.reshape(nn.op.permute_dims(attn, [0, 2, 1, 3]), (1, seq, d_model))
            x = self.norm1(x + self.out(attn))
            return self.norm2(x + self.fc2(nn.op.gelu(self.fc1(x))))

    return EncoderLayer(), (1, seq, d_model)


_BUILDERS: dict[str, Callable[[], tuple[Any, tuple[int, ...]]]] = {
    "resnet18": _resnet18, "mobilenet_v2": _mobilenet_v2, "transformer": _transformer}


def build(name: str, seed: int = 0) -> tuple[Any, np.ndarray]:
    """The model as a Relax IRModule with main(x) and its weights bound as constants, and an input."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend import nn

    model, shape = _BUILDERS[name]()
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(shape, "float32")}})
    rng = np.random.default_rng(seed)
    weights = {}
    for pname, param in params:
        fan_in = int(np.prod(param.shape[1:])) if len(param.shape) > 1 else 1
        scale = 1.0 / np.sqrt(fan_in) if len(param.shape) > 1 else 0.1
        value = rng.standard_normal([int(d) for d in param.shape]) * scale
        if "norm" in pname and pname.endswith("weight"):
            value = np.ones_like(value)
        weights[pname] = value.astype("float32")
    mod = relax.transform.BindParams("forward", weights)(mod)
    return tvm.IRModule({"main": mod["forward"].without_attr("num_input").with_attr("global_symbol", "main")}), \
        rng.standard_normal(shape).astype("float32")
