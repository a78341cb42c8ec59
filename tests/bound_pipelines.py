"""TIR and Relax pipelines the key's tests register, defined in a file (the key names a function that
is not TVM's by its source text: one given to `python -c` has none).

make(kind, scale) returns a TIR pipeline to register under "s_tir" whose behaviour is decided by a
value, not by its code: a functools.partial, a callable object, a bound method, a function wrapped
in functools.lru_cache, or a class registered itself, each making tvm.compile build
C = A * scale + 1 instead of the kernel it is given."""
from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any

import kernels
import tvm
from tvm.tirx.compilation_pipeline import PIPELINE_MAP

DEFAULT = PIPELINE_MAP["s_tir"]
KINDS = ("partial", "object", "method", "lru_cache", "class")


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


def _cached(scale: float) -> Any:
    @functools.lru_cache(maxsize=None)
    def cached(**kwargs: Any) -> Any:
        return scaled(scale, **kwargs)
    return cached


class ScaledClass:
    """Registered itself: TVM calls the class, and its __new__ gives the pipeline for the class's scale."""

    scale = 0.0

    def __new__(cls, **kwargs: Any) -> Any:
        return scaled(cls.scale, **kwargs)


def make(kind: str, scale: float) -> Any:
    if kind == "partial":
        return functools.partial(scaled, scale)
    if kind == "lru_cache":
        return _cached(scale)
    if kind == "class":
        return type("ScaledClass", (ScaledClass,), {"scale": scale})
    return Scaled(scale) if kind == "object" else Scaled(scale).pipeline


class Shifted:
    """A class registered itself, whose method says what it builds: C = A * 2 + 1."""

    def __new__(cls, **kwargs: Any) -> Any:
        return scaled(2.0, **kwargs)


FIRST_SHIFTED = Shifted


class Shifted:  # noqa: F811 - the same name and qualified name, another method body: C = A * 3 + 1
    def __new__(cls, **kwargs: Any) -> Any:
        return scaled(3.0, **kwargs)


# --- what other tests register --------------------------------------------------------------------

@tvm.tirx.transform.prim_func_pass(opt_level=0)
def _other_kernel(func, mod, ctx):   # builds C = A * 4301 + 1 instead
    return kernels.axpb(4301.0)["main"].with_attrs(func.attrs)


def custom(**kwargs: Any) -> Any:
    """A custom TIR pipeline: TVM's, after a pass that builds C = A * 4301 + 1."""
    pipeline, host, device = DEFAULT(**kwargs)
    return tvm.transform.Sequential([_other_kernel, pipeline]), host, device


def factory(scale: float, hold_a_pass: bool) -> Any:
    """A TIR pipeline made by a factory: holding `scale` (a number), or a pass object built from it."""
    @tvm.tirx.transform.prim_func_pass(opt_level=0)
    def scaled_pass(func, mod, ctx):   # builds C = A * scale + 1 instead
        return kernels.axpb(scale)["main"].with_attrs(func.attrs)

    def by_value(**kwargs: Any) -> Any:       # holds `scale` in its closure, makes its pass each time
        pipeline, host, device = DEFAULT(**kwargs)
        return tvm.transform.Sequential([_replaced_by(scale), pipeline]), host, device

    def by_pass(**kwargs: Any) -> Any:        # holds the pass object itself: its Python body cannot be keyed
        pipeline, host, device = DEFAULT(**kwargs)
        return tvm.transform.Sequential([scaled_pass, pipeline]), host, device
    return by_pass if hold_a_pass else by_value


def zero_only(**kwargs: Any) -> Any:
    return tvm.relax.pipeline.zero_pipeline(**kwargs)


def zero_then_fold(**kwargs: Any) -> Any:
    return tvm.transform.Sequential([tvm.relax.pipeline.zero_pipeline(**kwargs), tvm.relax.transform.FoldConstant()])


# --- a pipeline holding a bit of everything, for keys compared under two Python versions ----------

class Mode(enum.Enum):
    PLAIN = "plain"
    FOLDED = "folded"


@dataclasses.dataclass(frozen=True)
class Settings:
    scale: float
    mode: Mode = Mode.PLAIN
    names: tuple = ("a", "b")
    extra: dict = dataclasses.field(default_factory=lambda: {"opt": 3, "ratio": 0.1})


class Configured:
    """A callable object holding a dataclass (an enum, floats, a dict) and a partial of a cached function."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.make = functools.partial(_cached(settings.scale))

    def __call__(self, **kwargs: Any) -> Any:
        return self.make(**kwargs)


def everything(scale: float) -> Any:
    return Configured(Settings(scale, Mode.FOLDED))
