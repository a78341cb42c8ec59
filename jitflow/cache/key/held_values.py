"""What a registered callable runs and holds, named as text for the cache key.

A value is named by what it is, by the same text under every Python version:

- numbers, strings, bytes and containers of them by value (sets and dicts sorted), as text every Python
  version writes alike (strings as JSON, integers in hex);
- a Python function by its code (code_identity.py: TVM's and Python's own by name, any other by
  its source text) and what it holds: its closure cells and, but for Python's own, its default
  arguments; a `functools.partial` by its function, arguments and keywords; a bound method by its
  function and its object; a wrapper of Python's own with `__wrapped__` (`functools.lru_cache`,
  `functools.cache`) by the function it wraps;
- a class of TVM's or Python's own by its name; any other class by its methods (each as a function
  above) and class attributes (by value), its own and those it inherits from classes that are not
  TVM's or Python's; a dataclass also by its fields (their defaults and factories), which decide the
  methods it generates;
- modules by name, numpy arrays by their bytes, TVM IR by its structural hash, any other object by
  its class and the state pickle would save of it (`__reduce_ex__`: its attributes, or what its class
  says rebuilds it).

A value that cannot be named so is Unkeyable, with where it was found: a tvm.transform.Pass (its
Python body cannot be seen), an object pickle refuses (a lock, an open file), a function without
source text, values nested deeper than _MAX_DEPTH or more than _MAX_VALUES of them.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import itertools
import json
import types
from typing import Any

from ...text.format import article
from .code_identity import PYTHON, Unkeyable, class_home, function_text, home, qualified

#: how deep values inside values are followed, and how many are named at most, before giving up
_MAX_DEPTH, _MAX_VALUES = 12, 10_000
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
#: what a class body holds besides behaviour: its name, documentation, annotations, Python's bookkeeping
#: (which differs between Python versions: __firstlineno__, __static_attributes__), what dataclass_fields names
_BOOKKEEPING = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__", "__static_attributes__",
    "__annotations__", "__annotate__", "__orig_bases__", "__parameters__", "__type_params__", "__slots__",
    "__abstractmethods__", "_abc_impl", "__classcell__", "__dataclass_fields__", "__dataclass_params__",
    "__match_args__", "__slotnames__"})
#: attributes a class implemented in C holds: named by the class's name
_C_ATTRIBUTES = (types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
                 types.MemberDescriptorType, types.ClassMethodDescriptorType, types.BuiltinFunctionType)
#: the methods the dataclass decorator writes from the fields (by exec, so without source text), or takes from
#: its own module (`__replace__`, from Python 3.13 on)
_DATACLASS_METHODS = frozenset({"__init__", "__repr__", "__eq__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__",
                                "__setattr__", "__delattr__", "__getstate__", "__setstate__", "__replace__"})
_DATACLASS_PARAMS = ("init", "repr", "eq", "order", "unsafe_hash", "frozen")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Values:
    """Names values (see the module's docstring); one per callable named."""

    def __init__(self) -> None:
        self.count = 0
        self.active: set[int] = set()     # functions, classes and objects being named: those that refer to themselves

    def registered(self, fn: Any) -> str:
        """A registered callable's identity: a function as function() names it; a partial, a bound
        method, a wrapper, a class or a callable object by what it holds (value()), digested."""
        if isinstance(fn, types.FunctionType):
            return self.function(fn, 0, "it")
        text = self.value(fn, 0, "it")
        if isinstance(fn, functools.partial):
            kind, inner = "partial", fn.func
        elif isinstance(fn, types.MethodType):
            kind, inner = "method", fn.__func__
        elif isinstance(fn, type):
            kind, inner = "class", fn
        elif _wrapped(fn) is not None:
            kind, inner = "wrapper", _wrapped(fn)
        else:
            kind, inner = "object", fn
        return f"{kind} {qualified(inner)} {digest(text)}"

    def function(self, fn: Any, depth: int, where: str) -> str:
        """A Python function by its code and what its closure cells and default arguments hold."""
        code = fn.__code__
        identity = function_text(fn, code, where)
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
            if home(code.co_filename) != PYTHON:      # Python's own defaults are its version's
                for i, default in enumerate(fn.__defaults__ or ()):
                    held.append(f"default {i}: {self.value(default, depth + 1, f'its default argument {i}')}")
                for name, default in sorted((fn.__kwdefaults__ or {}).items()):
                    held.append(f"default {name}: {self.value(default, depth + 1, f'its default argument {name!r}')}")
        finally:
            self.active.discard(id(fn))
        return f"{identity} holding {digest(repr(held))}" if held else identity

    def value(self, value: Any, depth: int, where: str) -> str:
        self.count += 1
        if depth > _MAX_DEPTH or self.count > _MAX_VALUES:
            raise Unkeyable(f"{where} holds values nested deeper than {_MAX_DEPTH} levels or more than "
                            f"{_MAX_VALUES} of them")
        if isinstance(value, _PLAIN):
            return f"{type(value).__name__}:{_plain(value)}"
        if isinstance(value, (tuple, list)):
            return f"{type(value).__name__}[{', '.join(self.value(v, depth + 1, where) for v in value)}]"
        if isinstance(value, (set, frozenset)):
            return f"{type(value).__name__}{{{', '.join(sorted(self.value(v, depth + 1, where) for v in value))}}}"
        if isinstance(value, dict):
            items = sorted(f"{self.value(k, depth + 1, where)}: {self.value(v, depth + 1, where)}"
                           for k, v in value.items())
            return f"dict{{{', '.join(items)}}}"
        if isinstance(value, types.FunctionType):
            return f"function:{self.function(value, depth, where)}"
        if isinstance(value, functools.partial):
            return (f"partial:{self.value(value.func, depth + 1, where)}({self.value(value.args, depth + 1, where)}, "
                    f"{self.value(value.keywords, depth + 1, where)})")
        if isinstance(value, types.MethodType):
            function, bound = self.value(value.__func__, depth + 1, where), self.value(value.__self__, depth + 1, where)
            return f"method:{function} of {bound}"
        if isinstance(value, types.BuiltinFunctionType) and not isinstance(value.__self__, (types.ModuleType,
                                                                                          type(None))):
            return f"builtin method:{qualified(value)} of {self.value(value.__self__, depth + 1, where)}"
        if isinstance(value, types.BuiltinFunctionType):
            return f"builtin:{qualified(value)}"
        if isinstance(value, type):
            return f"class:{self.klass(value, depth, where)}"
        if isinstance(value, types.ModuleType):
            return f"module:{value.__name__}"
        return self._object(value, depth, where)

    def klass(self, cls: type, depth: int, where: str) -> str:
        """A class: TVM's and Python's own by name; any other by its methods and class attributes, and
        those of the classes it inherits from that are not TVM's or Python's."""
        if _named_by_name(cls):
            return qualified(cls)
        if id(cls) in self.active:
            return f"<{qualified(cls)} again>"
        parts = []
        self.active.add(id(cls))
        try:
            for klass in cls.__mro__:
                if _named_by_name(klass):
                    parts.append(f"base {qualified(klass)}")
                    continue
                fields = "__dataclass_fields__" in vars(klass)
                for name, attr in sorted(vars(klass).items()):
                    if name in _BOOKKEEPING or (_is_enum(klass) and _is_sunder(name)):
                        continue
                    if fields and name in _DATACLASS_METHODS and (_generated(attr) or _pythons(attr)):
                        continue                      # the fields below decide it
                    inside = f"{where} (class {qualified(klass)}, its {name!r})"
                    parts.append(f"{klass.__qualname__}.{name}: {self._attribute(attr, depth + 1, inside)}")
                if fields:
                    parts.append(self._dataclass_fields(klass, depth + 1, where))
        finally:
            self.active.discard(id(cls))
        return f"{qualified(cls)} {digest(repr(parts))}"

    def _attribute(self, attr: Any, depth: int, where: str) -> str:
        """What a class body binds to a name: methods as functions, C ones by their kind, values by value."""
        if isinstance(attr, (staticmethod, classmethod)):
            return f"{type(attr).__name__} {self.value(attr.__func__, depth, where)}"
        if isinstance(attr, property):
            return "property " + ", ".join(self.value(f, depth, where) for f in (attr.fget, attr.fset, attr.fdel))
        if isinstance(attr, _C_ATTRIBUTES):
            return f"C {type(attr).__name__}"
        return self.value(attr, depth, where)

    def _dataclass_fields(self, klass: type, depth: int, where: str) -> str:
        import dataclasses

        params = getattr(klass, "__dataclass_params__", None)
        out = [f"{p}={getattr(params, p, None)}" for p in _DATACLASS_PARAMS]
        for f in vars(klass)["__dataclass_fields__"].values():
            default = "-" if f.default is dataclasses.MISSING else self.value(f.default, depth, where)
            factory = "-" if f.default_factory is dataclasses.MISSING else self.value(f.default_factory, depth, where)
            out.append(f"field {f.name} default {default} factory {factory} init {f.init} "
                       f"kw_only {getattr(f, 'kw_only', False)} {f._field_type}")
        return "dataclass " + "; ".join(out)

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
        wrapped = _wrapped(value)
        if wrapped is not None:
            return f"wrapper:{kind} of {self.value(wrapped, depth + 1, where)}"
        return self._state(value, kind, depth, where)

    def _state(self, value: Any, kind: str, depth: int, where: str) -> str:
        """Any other object: its class and what pickle would save of it (what rebuilds it: its state)."""
        if id(value) in self.active:
            return f"<{kind} again>"
        try:
            reduced = value.__reduce_ex__(4)
        except Exception as exc:  # noqa: BLE001 - pickle's refusal is the reason
            raise Unkeyable(f"{where} holds {article(kind)} {kind} object, which the key cannot name: it has no "
                            f"state to "
                            f"name it by ({str(exc)[:120]})") from None
        self.active.add(id(value))
        try:
            cls = self.klass(type(value), depth + 1, f"{where} ({kind} object's class)")
            if isinstance(reduced, str):          # a module-level singleton, named by where it lives
                return f"object:{cls} global {reduced}"
            parts = [self._rebuilder(reduced[0], depth, where)]
            for n, part in enumerate(reduced[1:], 1):
                if n in (3, 4) and part is not None:   # list and dict items come as iterators
                    part = list(itertools.islice(part, _MAX_VALUES + 1))
                parts.append(self.value(part, depth + 1, f"{where} ({kind} object's state)"))
        finally:
            self.active.discard(id(value))
        return f"object:{cls} {', '.join(parts)}"

    def _rebuilder(self, rebuild: Any, depth: int, where: str) -> str:
        """What __reduce_ex__ calls to rebuild an object: pickle's own helpers by name."""
        if getattr(rebuild, "__module__", None) == "copyreg":
            return f"copyreg.{getattr(rebuild, '__name__', '?')}"
        return self.value(rebuild, depth + 1, where)


def _plain(value: Any) -> str:
    """A number, string or bytes as text that no Python version writes otherwise: strings as JSON (repr
    escapes the characters its Unicode database does not know, which grows with the version), integers
    in hex (repr refuses more than 4300 digits), the types' own repr for the rest (not a subclass's)."""
    if isinstance(value, str):
        return json.dumps(str(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return hex(value)
    for base in (bool, float, complex, bytes):
        if isinstance(value, base):
            return base.__repr__(value)
    return repr(value)


def _named_by_name(cls: type) -> bool:
    """Whether a class is TVM's or Python's own, made where its name says (not inside a function)."""
    return class_home(cls) is not None and "<locals>" not in getattr(cls, "__qualname__", "")


def _wrapped(value: Any) -> Any:
    """The function a wrapper object of TVM's or Python's own wraps (`functools.lru_cache`), else None."""
    if isinstance(value, type) or class_home(type(value)) is None:
        return None
    return getattr(value, "__dict__", {}).get("__wrapped__")


def _generated(attr: Any) -> bool:
    """Whether a function was written by exec (its file is not one: '<string>'), also inside the wrappers
    the dataclass decorator puts around some (reprlib.recursive_repr)."""
    for _ in range(4):
        wrapped = getattr(attr, "__wrapped__", None)
        if wrapped is None:
            break
        attr = wrapped
    code = getattr(attr, "__code__", None)
    return code is not None and code.co_filename.startswith("<")


def _pythons(attr: Any) -> bool:
    """Whether a function is Python's own (of its standard library)."""
    code = getattr(attr, "__code__", None)
    return code is not None and home(code.co_filename) == PYTHON


def _is_enum(cls: type) -> bool:
    return isinstance(cls, enum.EnumMeta)


def _is_sunder(name: str) -> bool:
    """An enum's _name_ of its own machinery (_member_map_, _value2member_map_, ...): Python versions differ in them."""
    return len(name) > 2 and name[0] == name[-1] == "_" and name[1] != "_" and name[-2] != "_"
