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
  by what decides its behaviour: a function by its module, name and bytecode, and what its
  closure cells and default arguments hold (a pipeline made by a factory, `make(scale)`, is
  another pipeline for another scale); a `functools.partial` by its function, arguments and
  keywords; a bound method by its function and the object it is bound to; a callable object by
  its class (name and the bytecode of the methods it defines or inherits, `__call__` among them)
  and its state. Those values are keyed by what they are: numbers, strings, bytes and containers
  of them by value, functions the same way as the pipeline (recursively), modules and classes by
  name, numpy arrays by their bytes, TVM IR by its structural hash, any other object by its class
  and the state pickle would save of it (`__reduce_ex__`: its attributes, or what its class says
  rebuilds it). A value that cannot be named so (a tvm.transform.Pass, whose Python body cannot be
  seen; an object pickle refuses, such as a lock or an open file) makes the callable Unkeyable: the
  build is then not cached (cache/key.py: CacheKey.uncacheable says why), unless a cache salt takes
  over naming it.

What cannot be seen this way (the body of a registered callback, the module globals a pipeline
function reads, a C++ registration that replaces another, a pass changed in place) needs
`cache_salt=` / JITFLOW_CACHE_SALT: docs/reliability.md.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import types
from typing import Any

from ..text.format import article
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


class Unkeyable(Exception):
    """A registered function holds a value the key cannot name; the message says which and where."""


#: how deep values inside values are followed, and how many are named at most, before giving up
_MAX_DEPTH, _MAX_VALUES = 12, 10_000
_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def _code_identity(fn: Any, code: Any) -> str:
    """module.qualname and a digest of the function's bytecode, names and constants (memoized)."""
    known = _identities.get(id(fn))
    if known is not None and known[0] is fn and known[1] is code:
        return known[2]
    h = hashlib.sha256()
    _code_digest(code, h)
    _identities[id(fn)] = (fn, code, f"{_name(fn)} {h.hexdigest()[:16]}")
    return _identities[id(fn)][2]


class _Values:
    """What a function holds, named as text for the key (see the module's docstring)."""

    def __init__(self) -> None:
        self.count = 0
        self.active: set[int] = set()     # functions being named: a closure that refers to itself

    def function(self, fn: Any, depth: int) -> str:
        code = getattr(fn, "__code__", None)
        if code is None:
            return _name(fn)
        identity = _code_identity(fn, code)
        if id(fn) in self.active:
            return f"<{identity} again>"
        held = []
        self.active.add(id(fn))
        try:
            for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
                try:
                    content = cell.cell_contents
                except ValueError:            # a cell not yet filled
                    held.append(f"{name}: <empty>")
                    continue
                held.append(f"{name}: {self.value(content, depth + 1, f'its closure cell {name!r}')}")
            for i, default in enumerate(fn.__defaults__ or ()):
                held.append(f"default {i}: {self.value(default, depth + 1, f'its default argument {i}')}")
            for name, default in sorted((fn.__kwdefaults__ or {}).items()):
                held.append(f"default {name}: {self.value(default, depth + 1, f'its default argument {name!r}')}")
        finally:
            self.active.discard(id(fn))
        if not held:
            return identity
        return f"{identity} holding {hashlib.sha256(repr(held).encode()).hexdigest()[:16]}"

    def registered(self, fn: Any) -> str:
        """A registered callable's identity: a function as function() names it; a partial, a bound
        method or a callable object by what it holds (value()), digested."""
        if isinstance(fn, types.FunctionType):
            return self.function(fn, 0)
        text = self.value(fn, 0, "it")
        if isinstance(fn, functools.partial):
            kind, inner = "partial", fn.func
        else:
            kind, inner = ("method", fn.__func__) if isinstance(fn, types.MethodType) else ("object", fn)
        return f"{kind} {_name(inner)} {hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def value(self, value: Any, depth: int, where: str) -> str:
        self.count += 1
        if depth > _MAX_DEPTH or self.count > _MAX_VALUES:
            raise Unkeyable(f"{where} holds values nested deeper than {_MAX_DEPTH} levels or more than "
                            f"{_MAX_VALUES} of them")
        if isinstance(value, _PLAIN):
            return f"{type(value).__name__}:{value!r}"
        if isinstance(value, (tuple, list)):
            return f"{type(value).__name__}[{', '.join(self.value(v, depth + 1, where) for v in value)}]"
        if isinstance(value, (set, frozenset)):
            return f"{type(value).__name__}{{{', '.join(sorted(self.value(v, depth + 1, where) for v in value))}}}"
        if isinstance(value, dict):
            items = sorted(f"{self.value(k, depth + 1, where)}: {self.value(v, depth + 1, where)}"
                           for k, v in value.items())
            return f"dict{{{', '.join(items)}}}"
        if isinstance(value, types.FunctionType):
            return f"function:{self.function(value, depth)}"
        if isinstance(value, functools.partial):
            return (f"partial:{self.value(value.func, depth + 1, where)}({self.value(value.args, depth + 1, where)}, "
                    f"{self.value(value.keywords, depth + 1, where)})")
        if isinstance(value, types.MethodType):
            return f"method:{self.value(value.__func__, depth + 1, where)} of {self.value(value.__self__, depth + 1, where)}"
        if isinstance(value, types.BuiltinFunctionType) and not isinstance(value.__self__, (types.ModuleType,
                                                                                          type(None))):
            return f"builtin method:{_name(value)} of {self.value(value.__self__, depth + 1, where)}"
        if isinstance(value, (types.BuiltinFunctionType, type)):
            return f"{type(value).__name__}:{_name(value)}"
        if isinstance(value, types.ModuleType):
            return f"module:{value.__name__}"
        return self._object(value, depth, where)

    def _object(self, value: Any, depth: int, where: str) -> str:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        if kind.startswith("numpy.") and hasattr(value, "tobytes") and hasattr(value, "dtype"):
            import numpy as np

            array = np.ascontiguousarray(value)
            return f"{kind}:{array.dtype}{list(array.shape)} {hashlib.sha256(array.tobytes()).hexdigest()}"
        if kind.startswith("tvm"):
            import tvm

            if isinstance(value, tvm.transform.Pass):
                raise Unkeyable(f"{where} holds a TVM pass ({type(value).__name__}), whose Python body (if any) "
                                "the key cannot see")
            if isinstance(value, tvm.target.Target):
                return f"target:{value}"
            try:
                import tvm_ffi

                return f"{kind}:{tvm_ffi.structural_hash(value)}"
            except Exception:  # noqa: BLE001 - an object TVM cannot hash structurally
                raise Unkeyable(f"{where} holds {article(kind)} {kind} object, which the key cannot name") from None
        return self._state(value, kind, depth, where)

    def _state(self, value: Any, kind: str, depth: int, where: str) -> str:
        """Any other object: its class and what pickle would save of it (what rebuilds it: its state)."""
        if id(value) in self.active:
            return f"<{kind} again>"
        try:
            reduced = value.__reduce_ex__(4)
        except Exception as exc:  # noqa: BLE001 - pickle's refusal is the reason
            raise Unkeyable(f"{where} holds {article(kind)} {kind} object, which the key cannot name: it has no "
                            f"state to name it by ({str(exc)[:120]})") from None
        if isinstance(reduced, str):          # a module-level singleton, named by where it lives
            return f"{kind}:global {reduced}"
        self.active.add(id(value))
        try:
            parts = [self._rebuilder(reduced[0], depth, where)]
            for n, part in enumerate(reduced[1:], 1):
                if n in (3, 4) and part is not None:   # list and dict items come as iterators
                    part = list(itertools.islice(part, _MAX_VALUES + 1))
                parts.append(self.value(part, depth + 1, f"{where} ({kind} object's state)"))
        finally:
            self.active.discard(id(value))
        return f"object:{_class_identity(type(value))} {', '.join(parts)}"

    def _rebuilder(self, rebuild: Any, depth: int, where: str) -> str:
        """What __reduce_ex__ calls to rebuild an object: pickle's own helpers by name."""
        if getattr(rebuild, "__module__", None) == "copyreg":
            return f"copyreg.{getattr(rebuild, '__name__', '?')}"
        return self.value(rebuild, depth + 1, where)


def _class_identity(cls: type) -> str:
    """module.qualname of a class and a digest of the bytecode of the methods it defines or inherits
    (those of classes written in Python; builtins' are part of Python's version)."""
    h = hashlib.sha256()
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        for name, attr in sorted(vars(klass).items()):
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            elif isinstance(attr, property):
                attr = attr.fget
            code = getattr(attr, "__code__", None)
            if code is not None:
                h.update(f"{_name(klass)}.{name}".encode())
                _code_digest(code, h)
    return f"{_name(cls)} {h.hexdigest()[:16]}"


def function_identity(fn: Any, what: str = "the function") -> str:
    """What decides a registered callable's behaviour, as stable text: a Python function's
    module.qualname and a digest of its bytecode and of what its closure cells and default
    arguments hold; a partial's, a bound method's or a callable object's digest of what it holds
    (see the module's docstring). Unkeyable (saying `what` holds which value) when one of those
    cannot be named."""
    try:
        return _Values().registered(fn)
    except Unkeyable as exc:
        raise Unkeyable(f"{what} ({_name(fn)}): {exc}") from None


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
