"""The TVM registrations a build depends on that can be seen from Python: part of the cache key.

TVM lets a process change what it emits without changing the module: intrinsic lowering rules
(`tvm.tirx.op.register_intrin_lowering`, `register_op_attr(..., "<target>.FLowerIntrinsic")`),
global callbacks its code generators call (`tvm_callback_cuda_postproc`), and the functions
behind Relax pipeline names (`tvm.relax.pipeline.PIPELINE_MAP`). What the key records:

- for every intrinsic the module calls (read from its text), what each lowering rule that
  applies to the target returns for a probe call, per floating-point dtype the module uses;
- which of the callbacks the target's code generator consults are registered;
- for a Relax pipeline given by name, the module, name and bytecode of the function behind it.

What cannot be seen this way (the body of a registered callback, a C++ registration that replaces
another, a pass changed in place) needs `cache_salt=` / JITFLOW_CACHE_SALT: docs/reliability.md.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

#: global functions each target's code generator calls when they exist
HOOKS = {"c": (), "cuda": ("tvm_callback_cuda_postproc",)}
#: op attributes TVM's LowerIntrin pass consults, per target kind (the host is always "c")
_PATTERNS = {
    "c": ("c.FLowerIntrinsic", "c.FLegalize", "default.FLowerIntrinsic", "default.FLegalize"),
    "cuda": ("cuda.FLowerIntrinsic", "cuda.FLegalize", "cuda.fastmath.FLowerIntrinsic",
             "default.FLowerIntrinsic", "default.FLegalize"),
}
_CALL_RE = re.compile(r"\bT\.([A-Za-z_][A-Za-z0-9_]*)\(")
#: TVMScript names that are never intrinsic calls (asking TVM about each costs an exception once)
_NOT_OPS = re.compile(r"(u?int\d+|b?float\d+|bool|handle|void|Buffer|prim_func|reads|writes|sblock|sblock_attr|"
                      r"match_buffer|alloc_buffer|decl_buffer|init|grid|serial|parallel|vectorized|unroll|"
                      r"thread_binding|launch_thread|env_thread|func_attr|Cast|Select|Broadcast|Ramp|Let)")
_FLOAT_RE = re.compile(r"\b(bfloat16|float16|float32|float64)\b")
_probes: dict[tuple[str, str, str], tuple[Any, str]] = {}   # holds each rule: its address is never reused


@lru_cache(maxsize=None)
def _op(name: str) -> Any:
    """The TIR op `tirx.<name>`, or None when the name is not an op (T.float32(...), T.axis...)."""
    import tvm

    try:
        return tvm.ir.Op.get(f"tirx.{name}")
    except Exception:
        return None


def _probe(op: Any, pattern: str, dtype: str) -> str | None:
    """What the lowering rule `pattern` of `op` makes of a call with `dtype` arguments (None: no rule)."""
    import tvm

    if not op.has_attr(pattern):
        return None
    rule = op.get_attr(pattern)
    if rule is None:
        return None
    memo = (op.name, pattern, dtype)
    known = _probes.get(memo)
    if known is not None and known[0].same_as(rule):
        return known[1]
    args = [tvm.tirx.Var(f"x{i}", dtype) for i in range(max(int(op.num_inputs), 1))]
    try:
        lowered = str(rule(tvm.tirx.op.call_intrin(dtype, op.name, *args)))
    except Exception as exc:  # a rule that refuses the probe: still a stable fact about it
        lowered = f"error {type(exc).__name__}"
    _probes[memo] = (rule, lowered)
    return lowered


def intrinsic_rules(ir_text: str, kinds: tuple[str, ...]) -> dict[str, str]:
    """'op pattern dtype' -> the lowered probe, for every intrinsic `ir_text` calls."""
    dtypes = sorted(set(_FLOAT_RE.findall(ir_text))) or ["float32"]
    patterns = list(dict.fromkeys(p for kind in kinds for p in _PATTERNS.get(kind, ())))
    out = {}
    for name in sorted(set(_CALL_RE.findall(ir_text))):
        op = None if _NOT_OPS.fullmatch(name) else _op(name)
        if op is None:
            continue
        for pattern in patterns:
            for dtype in dtypes:
                lowered = _probe(op, pattern, dtype)
                if lowered is not None:
                    out[f"{name} {pattern} {dtype}"] = lowered
    return out


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
    h = hashlib.sha256()
    _code_digest(code, h)
    return f"{name} {h.hexdigest()[:16]}"


def relax_pipeline_identity(name: str) -> str | None:
    """What stands behind a Relax pipeline name in tvm.relax.pipeline.PIPELINE_MAP (None: unknown name)."""
    import tvm

    fn = tvm.relax.pipeline.PIPELINE_MAP.get(name)
    return None if fn is None else function_identity(fn)


def fingerprint(ir_text: str, kind: str) -> dict[str, Any]:
    """Everything above for a module's text and target kind ('c' or 'cuda'); host code is always C."""
    kinds = ("c", kind) if kind != "c" else ("c",)
    out: dict[str, Any] = {"intrinsics": intrinsic_rules(ir_text, kinds)}
    found = hooks(kinds)
    if found:
        out["hooks"] = found
    return out
