"""TIR pipelines whose behaviour is decided by a bound value, not by their code: a functools.partial,
a callable object and a bound method, each making tvm.compile build C = A * scale + 1 instead of
the kernel it is given. make(kind, scale) returns one to register under "s_tir"."""
from __future__ import annotations

import functools
from typing import Any

import kernels
import tvm
from tvm.tirx.compilation_pipeline import PIPELINE_MAP

DEFAULT = PIPELINE_MAP["s_tir"]
KINDS = ("partial", "object", "method")


def _replaced_by(scale: float) -> Any:
    """A pass that swaps every function for axpb(scale)'s, keeping its attributes."""
    return tvm.tirx.transform.prim_func_pass(
        lambda func, mod, ctx: kernels.axpb(scale)["main"].with_attrs(func.attrs), opt_level=0)


def scaled(scale: float, **kwargs: Any) -> Any:
    pipeline, host, device = DEFAULT(**kwargs)
    return tvm.transform.Sequential([_replaced_by(scale), pipeline]), host, device


class Scaled:
    """The same as a callable object; its method `pipeline` as a bound method."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, **kwargs: Any) -> Any:
        return scaled(self.scale, **kwargs)

    def pipeline(self, **kwargs: Any) -> Any:
        return scaled(self.scale, **kwargs)


def make(kind: str, scale: float) -> Any:
    if kind == "partial":
        return functools.partial(scaled, scale)
    return Scaled(scale) if kind == "object" else Scaled(scale).pipeline
