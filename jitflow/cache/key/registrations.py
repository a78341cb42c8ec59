"""The TVM registrations a build depends on that can be seen from Python: part of the cache key.

TVM lets a process change what it emits without changing the module: intrinsic lowering rules
(`tvm.tirx.register_intrin_lowering`, `register_op_attr(..., "<target>.FLowerIntrinsic")`),
global callbacks its code generators call (`tvm_callback_cuda_postproc`), and the functions
behind pipeline names (TIR: `tvm.tirx.register_tir_pipeline`; Relax: `tvm.relax.pipeline.PIPELINE_MAP`).
What the key records:

- every lowering rule for the target that is not compiled into TVM (lowering_rules.py): what it
  makes of a probe call per dtype, whichever intrinsics the module names;
- which of the callbacks the target's code generator consults are registered;
- the TIR pipeline TVM will run and, for a Relax pipeline given by name, the callable behind it,
  by what it runs and holds (held_values.py), the same text under every Python version: a function
  of TVM's own by its name (TVM's version is in the key), any other by its source text
  (code_identity.py), never by CPython's bytecode; and what its closure cells and default arguments
  hold (a pipeline made by a factory, `make(scale)`, is another pipeline for another scale); a
  `functools.partial` by its function, arguments and keywords; a bound method by its function and
  its object; a `functools.lru_cache` (or another wrapper with `__wrapped__`) by the function it
  wraps; a class by its methods and class attributes; a callable object by its class and its state.
  A callable that holds what cannot be named (a tvm.transform.Pass, whose Python body cannot be
  seen; an object pickle refuses, such as a lock; a function without source text, made by exec) is
  Unkeyable: the build is then not cached (cache/key/key.py: CacheKey.uncacheable says why), unless a
  cache salt takes over naming it.

What cannot be seen this way (the body of a registered callback, the module globals a pipeline
function reads, a C++ registration that replaces another, a pass changed in place) needs
`cache_salt=` / JITFLOW_CACHE_SALT: docs/reliability.md.
"""
from __future__ import annotations

from typing import Any

from .code_identity import Unkeyable, qualified
from .held_values import Values
from .lowering_rules import foreign_rules

__all__ = ["HOOKS", "TIR_PIPELINE", "Unkeyable", "fingerprint", "function_identity", "hooks",
           "relax_pipeline_identity", "tir_pipeline_identity"]

#: global functions each target's code generator calls when they exist
HOOKS = {"c": (), "cuda": ("tvm_callback_cuda_postproc",)}
#: the TIR pipeline tvm.compile runs: the name its "default" stands for in TVM 0.27
TIR_PIPELINE = "s_tir"


def hooks(kinds: tuple[str, ...]) -> list[str]:
    """The code-generator callbacks registered in this process for these target kinds."""
    import tvm_ffi

    names = sorted({h for kind in kinds for h in HOOKS.get(kind, ())})
    return [n for n in names if tvm_ffi.get_global_func(n, allow_missing=True) is not None]


def function_identity(fn: Any, what: str = "the function") -> str:
    """What decides a registered callable's behaviour, as text that is the same under every Python
    version: a Python function's module.qualname (and, unless it is TVM's or Python's own, a digest
    of its source text) and a digest of what its closure cells and default arguments hold; a
    partial's, a bound method's, a wrapper's, a class's or a callable object's digest of what it runs
    and holds (see the module's docstring). Unkeyable (saying `what` holds which value) when one of
    those cannot be named."""
    try:
        return Values().registered(fn)
    except Unkeyable as exc:
        raise Unkeyable(f"{what} ({qualified(fn)}): {exc}") from None


def tir_pipeline_identity() -> str:
    """The function TVM runs as the TIR pipeline, by its identity: tvm.compile (and relax.build, for
    a model's kernels) asks for "default", which tvm.tirx.get_tir_pipeline maps to the function
    registered under "s_tir" (tvm.tirx.register_tir_pipeline replaces it)."""
    from tvm.tirx.compilation_pipeline import PIPELINE_MAP

    fn = PIPELINE_MAP.get(TIR_PIPELINE)
    what = f"the TIR pipeline registered under {TIR_PIPELINE!r}"
    return f"{TIR_PIPELINE} = {'none' if fn is None else function_identity(fn, what)}"


def relax_pipeline_identity(name: str) -> str | None:
    """What stands behind a Relax pipeline name in tvm.relax.pipeline.PIPELINE_MAP (None: unknown name)."""
    import tvm

    fn = tvm.relax.pipeline.PIPELINE_MAP.get(name)
    return None if fn is None else function_identity(fn, f"the Relax pipeline {name!r}")


def fingerprint(ir_text: str, kind: str) -> dict[str, Any]:
    """Everything above for a module's text and target kind ('c' or 'cuda'); host code is always C.
    A TIR pipeline that cannot be keyed is recorded as such, with the reason (`unkeyable`)."""
    kinds = ("c", kind) if kind != "c" else ("c",)
    try:
        pipeline = tir_pipeline_identity()
    except Unkeyable as exc:
        pipeline = f"{TIR_PIPELINE} = unkeyable"
        unkeyable: str | None = str(exc)
    else:
        unkeyable = None
    out: dict[str, Any] = {"intrinsics": foreign_rules(kinds, ir_text), "tir_pipeline": pipeline}
    if unkeyable:
        out["unkeyable"] = unkeyable
    found = hooks(kinds)
    if found:
        out["hooks"] = found
    return out
