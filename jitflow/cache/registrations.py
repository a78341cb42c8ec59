"""The TVM registrations a build depends on that can be seen from Python: part of the cache key.

TVM lets a process change what it emits without changing the module: intrinsic lowering rules
(`tvm.tirx.register_intrin_lowering`, `register_op_attr(..., "<target>.FLowerIntrinsic")`),
global callbacks its code generators call (`tvm_callback_cuda_postproc`), and the functions
behind pipeline names (TIR: `tvm.tirx.register_tir_pipeline`; Relax: `tvm.relax.pipeline.PIPELINE_MAP`).
What the key records:

- every lowering rule for the target that is not compiled into TVM (lowering_rules.py): what it
  makes of a probe call per dtype, whichever intrinsics the module names;
- which of the callbacks the target's code generator consults are registered;
- the TIR pipeline TVM will run and, for a Relax pipeline given by name, the function behind it:
  its module, name and bytecode.

What cannot be seen this way (the body of a registered callback, a C++ registration that replaces
another, a pass changed in place) needs `cache_salt=` / JITFLOW_CACHE_SALT: docs/reliability.md.
"""
from __future__ import annotations

import hashlib
from typing import Any

from .lowering_rules import foreign_rules

#: global functions each target's code generator calls when they exist
HOOKS = {"c": (), "cuda": ("tvm_callback_cuda_postproc",)}
#: the TIR pipeline tvm.compile runs: the name its "default" stands for in TVM 0.27
TIR_PIPELINE = "s_tir"
_identities: dict[int, tuple[Any, Any, str]] = {}   # id -> (the function, held; its code; its identity)


def hooks(kinds: tuple[str, ...]) -> list[str]:
    """The code-generator callbacks registered in this process for these target kinds."""
    import tvm_ffi

    names = sorted({h for kind in kinds for h in HOOKS.get(kind, ())})
    return [n for n in names if tvm_ffi.get_global_func(n, allow_missing=True) is not None]


def _code_digest(code: Any, h: Any) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _code_digest(const, h)
        elif isinstance(const, frozenset):
            h.update(repr(sorted(map(repr, const))).encode())
        else:
            h.update(repr(const).encode())


def function_identity(fn: Any) -> str:
    """module.qualname and a digest of the bytecode of a Python function (stable across processes)."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    code = getattr(fn, "__code__", None)
    if code is None:
        return name
    known = _identities.get(id(fn))
    if known is not None and known[0] is fn and known[1] is code:
        return known[2]
    h = hashlib.sha256()
    _code_digest(code, h)
    _identities[id(fn)] = (fn, code, f"{name} {h.hexdigest()[:16]}")
    return _identities[id(fn)][2]


def tir_pipeline_identity() -> str:
    """The function TVM runs as the TIR pipeline, by its identity: tvm.compile (and relax.build, for
    a model's kernels) asks for "default", which tvm.tirx.get_tir_pipeline maps to the function
    registered under "s_tir" (tvm.tirx.register_tir_pipeline replaces it)."""
    from tvm.tirx.compilation_pipeline import PIPELINE_MAP

    fn = PIPELINE_MAP.get(TIR_PIPELINE)
    return f"{TIR_PIPELINE} = {'none' if fn is None else function_identity(fn)}"


def relax_pipeline_identity(name: str) -> str | None:
    """What stands behind a Relax pipeline name in tvm.relax.pipeline.PIPELINE_MAP (None: unknown name)."""
    import tvm

    fn = tvm.relax.pipeline.PIPELINE_MAP.get(name)
    return None if fn is None else function_identity(fn)


def fingerprint(ir_text: str, kind: str) -> dict[str, Any]:
    """Everything above for a module's text and target kind ('c' or 'cuda'); host code is always C."""
    kinds = ("c", kind) if kind != "c" else ("c",)
    out: dict[str, Any] = {"intrinsics": foreign_rules(kinds, ir_text), "tir_pipeline": tir_pipeline_identity()}
    found = hooks(kinds)
    if found:
        out["hooks"] = found
    return out
