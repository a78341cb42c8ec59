"""A report at a shape: every size, total, peak, grid and block dim with the given shape symbols
bound to numbers (`rep.evaluate(n=32, s=128)`, `jitflow inspect SPEC --shape n=32,s=128`).

Each value is rebuilt with its expressions bound (c_expr's Expr.bind): an expression whose symbols
are all given becomes a number, one with a symbol left out stays symbolic. A name that no size of
the report uses is an error that lists the symbols it has, and so is one bound already (the
report keeps the shape it was evaluated at, to say it wherever it is shown).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping

from ..errors import InvalidInputError
from ..formats import c_expr
from ..formats.c_expr import Expr
from .memory_plan import ModelTensor


def bind(value: Any, shape: Mapping[str, int]) -> Any:
    """`value` with every Expr inside it bound: dataclasses, tuples, lists and dicts are rebuilt,
    anything else is kept as it is."""
    if isinstance(value, Expr):
        return value.bind(**shape)
    if isinstance(value, ModelTensor) and value.shape is not None:     # dims: numbers or expression texts
        dims = tuple(d if isinstance(d, int) else c_expr.parse(d).bind(**shape).to_json() for d in value.shape)
        return dataclasses.replace(value, shape=dims)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: bind(getattr(value, f.name), shape) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(bind(v, shape) for v in value)
    if isinstance(value, list):
        return [bind(v, shape) for v in value]
    if isinstance(value, dict):
        return {k: bind(v, shape) for k, v in value.items()}
    return value


def symbols_in(value: Any) -> set[str]:
    """Every shape symbol the Exprs inside `value` use."""
    if isinstance(value, Expr):
        return set(value.symbols)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return set().union(*(symbols_in(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (tuple, list)):
        return set().union(*(symbols_in(v) for v in value))
    if isinstance(value, dict):
        return set().union(*(symbols_in(v) for v in value.values()))
    return set()


def check_names(shape: Mapping[str, int], known: Iterable[str], bound: Mapping[str, int] | None = None) -> None:
    """Refuse a symbol the report does not have or has bound already (`bound`: the shape it is at),
    and a value that is not a whole number >= 0."""
    names = sorted(set(known))
    again = [k for k in shape if k in (bound or {})]
    if again:
        at = ", ".join(f"{k} = {bound[k]}" for k in again)  # type: ignore[index]
        raise InvalidInputError(f"this report is at {at} already: evaluate the report it was made from "
                                f"(rep.evaluate returns a new report and leaves its own unchanged)")
    unknown = [k for k in shape if k not in names]
    if unknown:
        have = f"its symbols are {', '.join(names)}" if names else "its sizes are all numbers already"
        raise InvalidInputError(f"this report has no shape symbol {', '.join(map(repr, unknown))}; {have}")
    for k, v in shape.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidInputError(f"shape symbol {k}={repr(v)[:40]}: give a whole number, 0 or more")
        if v < 0:
            raise InvalidInputError(f"shape symbol {k}: give a whole number, 0 or more (not a negative one)")
        if v > MAX_DIM:
            raise InvalidInputError(f"shape symbol {k}: a shape is at most {MAX_DIM} (2**63 - 1, as TVM's shapes "
                                    "are 64-bit)")


#: the largest value a shape symbol takes: TVM's shapes are 64-bit signed integers
MAX_DIM = (1 << 63) - 1
_NUMBER = re.compile(r"[0-9]+")


def parse_shape(text: str) -> dict[str, int]:
    """'n=32,s=128' -> {"n": 32, "s": 128} (what --shape takes): whole numbers of ASCII digits, at most
    MAX_DIM, checked before they are converted (a number of 5000 digits is an error, not a traceback)."""
    out: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        name, sep, value = item.partition("=")
        value = value.strip()
        if not sep or not name.strip() or not _NUMBER.fullmatch(value):
            raise InvalidInputError(f"--shape {text[:80]}: expected NAME=NUMBER[,NAME=NUMBER...], e.g. --shape n=32,s=128")
        if len(value.lstrip("0")) > len(str(MAX_DIM)) or int(value) > MAX_DIM:
            raise InvalidInputError(f"--shape {name.strip()}={value[:20]}{'...' if len(value) > 20 else ''}: "
                                    f"a shape is at most {MAX_DIM} (2**63 - 1, as TVM's shapes are 64-bit)")
        out[name.strip()] = int(value)
    return out
