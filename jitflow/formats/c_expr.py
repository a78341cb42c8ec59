"""Integer expressions (sizes, grid and block dims) made readable and computable: read from generated
C, from the VM's bytecode, or from the text TVM's arithmetic simplified at build time.

TVM's host code spells a size as `((uint64_t)2ULL * ((uint64_t)n))`; a report wants `2 * n`, its
value where it is a constant, and a way to compute it for given shapes. Casts and literal suffixes
are dropped (the values are sizes and counts, far from the types' limits) and the rest is read as a
Python expression evaluated with C's integer rules.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Mapping

from ..errors import InvalidInputError

_CAST = re.compile(r"\(\s*(?:const\s+)?(?:(?:unsigned|signed)\s+)?"
                   r"(?:u?int(?:8|16|32|64)_t|long\s+long|long|int|short|char|size_t|bool)\s*\)")
_SUFFIX = re.compile(r"\b(\d+)(?:ULL|LLU|LL|UL|LU|U|L)\b", re.IGNORECASE)
_MAX_DEPTH = 32
#: longer text is kept as text, not read (no size expression of a real build comes near it)
MAX_TEXT = 16 << 10


def clean(text: str) -> str:
    """C expression text -> Python expression text (no casts, no literal suffixes, and/or/not)."""
    out = _SUFFIX.sub(r"\1", _CAST.sub("", text))
    out = out.replace("&&", " and ").replace("||", " or ")
    return re.sub(r"!(?!=)", " not ", out).strip()


@dataclass(frozen=True)
class Expr:
    """An integer expression: readable text, its value when constant, and the symbols it depends on."""

    text: str
    value: int | None = None
    symbols: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text

    @property
    def is_constant(self) -> bool:
        return self.value is not None

    def evaluate(self, **bindings: int) -> int:
        """The value for the given symbols (e.g. n=1000); InvalidInputError names any that are missing."""
        if self.value is not None:
            return self.value
        missing = [s for s in self.symbols if s not in bindings]
        if missing:
            raise InvalidInputError(f"{self.text}: give a value for {', '.join(missing)}")
        try:
            return _eval(ast.parse(self.text, mode="eval").body, bindings)
        except (SyntaxError, _NotInteger) as exc:
            raise InvalidInputError(f"cannot evaluate {self.text!r}: {exc}") from None

    def bind(self, **bindings: int) -> "Expr":
        """The expression with the given symbols replaced by their values (a number once all are)."""
        if self.value is not None or not any(s in bindings for s in self.symbols):
            return self
        return parse(self.text, {k: str(int(v)) for k, v in bindings.items() if k in self.symbols})

    def to_json(self) -> int | str:
        return self.value if self.value is not None else self.text

    @classmethod
    def from_json(cls, value: int | str) -> "Expr":
        return constant(value) if isinstance(value, int) else parse(str(value))


def constant(value: int) -> Expr:
    return Expr(str(value), int(value), ())


def total(terms: list[Expr]) -> Expr:
    """The sum, folded where constant: constants added up, the symbolic terms kept in order."""
    known = sum(t.value for t in terms if t.value is not None)
    rest = [f"({t.text})" for t in terms if t.value is None]
    if not rest:
        return constant(known)
    return parse(" + ".join(rest + ([str(known)] if known else [])))


def product(factors: list[Expr]) -> Expr:
    """The product of size expressions, folded where constant."""
    if all(f.value is not None for f in factors):
        return constant(math.prod(f.value for f in factors))  # type: ignore[misc]
    texts = [f"({f.text})" for f in factors if f.value != 1]
    return parse(" * ".join(texts) or "1")


def maximum(terms: list[Expr]) -> Expr:
    """The largest of the terms: a number when all are, else `max(...)` of the distinct symbolic
    terms (with the largest constant, if it is not zero)."""
    known = [t.value for t in terms if t.value is not None]
    rest = list(dict.fromkeys(t.text for t in terms if t.value is None))
    if not rest:
        return constant(max(known, default=0))
    if max(known, default=0) > 0:
        rest.append(str(max(known)))
    return rest[0] and (parse(rest[0]) if len(rest) == 1 else parse(f"max({', '.join(rest)})"))


class _NotInteger(Exception):
    pass


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise _NotInteger("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - _c_div(a, b) * b


def _shift(b: int) -> int:
    """A shift count C defines for a 64-bit integer (0 to 63); others are not evaluated (a count of
    2**40 would make a number of a terabit)."""
    if not 0 <= b < 64:
        raise _NotInteger(f"shift by {b}")
    return b


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: _c_div, ast.FloorDiv: lambda a, b: a // b if b else _c_div(a, b), ast.Mod: _c_mod,
    ast.LShift: lambda a, b: a << _shift(b), ast.RShift: lambda a, b: a >> _shift(b),
    ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
}
_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
}


def _eval(node: ast.AST, env: Mapping[str, int]) -> int:
    """Evaluate with C integer semantics; anything else raises _NotInteger."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.Name):
        if node.id in env:
            return int(env[node.id])
        raise _NotInteger(f"unknown symbol {node.id}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            return ~v
        if isinstance(node.op, ast.Not):
            return int(not v)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return int(_COMPARE[type(node.ops[0])](_eval(node.left, env), _eval(node.comparators[0], env)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
            and node.args and not node.keywords:
        values = [_eval(a, env) for a in node.args]
        return min(values) if node.func.id == "min" else max(values)
    raise _NotInteger(f"unsupported {type(node).__name__} in an integer expression")


class _Substitute(ast.NodeTransformer):
    """Replace local variables by their definitions and fold constant sub-expressions."""

    def __init__(self, definitions: Mapping[str, str], depth: int) -> None:
        self.definitions = definitions
        self.depth = depth

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return node        # (ast's own visit_Constant looks for long-gone visitor names: slow)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        text = self.definitions.get(node.id)
        if text is None or self.depth >= _MAX_DEPTH:
            return node
        try:
            inner = ast.parse(clean(text), mode="eval").body
        except SyntaxError:
            return node
        return _Substitute(self.definitions, self.depth + 1).visit(inner)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Call)):
            try:
                return ast.Constant(_eval(node, {}))
            except _NotInteger:
                return _fold_factors(node)
        return node


def _fold_factors(node: ast.AST) -> ast.AST:
    """(2 * s) * 4 -> s * 8: the constant factors of a product gathered on the right."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.right, ast.Constant)
            and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult)):
        return node
    inner = node.left
    for const, other in ((inner.left, inner.right), (inner.right, inner.left)):
        if isinstance(const, ast.Constant) and isinstance(const.value, int):
            return ast.BinOp(other, ast.Mult(), ast.Constant(const.value * node.right.value))
    return node


def parse(text: str, definitions: Mapping[str, str] | None = None) -> Expr:
    """Read a C (or already readable) integer expression, substituting `definitions` (name -> C text)."""
    cleaned = clean(text)
    if len(cleaned) > MAX_TEXT:
        return Expr(cleaned)
    try:
        tree = ast.parse(cleaned, mode="eval").body
        tree = _Substitute(definitions or {}, 0).visit(tree)
        names = tuple(sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
                             - {"min", "max"}))
        try:
            value: int | None = _eval(tree, {})
        except _NotInteger:
            value = None
        return Expr(str(value) if value is not None else _text(tree), value, names)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # not an expression Python reads within its limits (nested too deep, a number of too many
        # digits): kept as text, as for any expression that is not C's
        return Expr(cleaned)


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
        ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_CHAINS = ({ast.Add, ast.Sub}, {ast.Mult})
_PRODUCTS = {ast.Mult, ast.Div, ast.FloorDiv, ast.Mod}


def _text(node: ast.AST) -> str:
    """Readable text: operands of a different operator are parenthesized, `(n + 127) >> 7`."""
    if not isinstance(node, ast.BinOp) or type(node.op) not in _OPS:
        return ast.unparse(node)

    def side(child: ast.AST, left: bool) -> str:
        inner = _text(child)
        if isinstance(child, ast.BinOp):
            same = any(type(node.op) in c and type(child.op) in c for c in _CHAINS)
            tighter = type(node.op) in _CHAINS[0] and type(child.op) in _PRODUCTS   # n * 32 + 8
            if not (tighter or (same and (left or type(child.op) is ast.Mult))):
                return f"({inner})"
        elif isinstance(child, (ast.BoolOp, ast.Compare, ast.IfExp)):
            return f"({inner})"
        return inner

    return f"{side(node.left, True)} {_OPS[type(node.op)]} {side(node.right, False)}"
