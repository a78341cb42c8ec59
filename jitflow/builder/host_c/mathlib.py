"""float32 math at vector speed for the C host: branch-free C that clang vectorizes, in scalar and vector forms.

TVM's LLVM host calls libm once per lane for float32 `exp`, `log`, `erf`, `sin` and the rest, and so
did the C host. These definitions compute each function in double precision from the float input
(the result is rounded to float once, so it is within a hair of correctly rounded: see docs/c_host.md
for the accuracy table), with no table lookups and no branches except the rare fallback of sin, cos
and tan for |x| >= 2^19, so that

- a scalar form (`jitflow_expf(float)`) inside a plain serial loop is vectorized by clang's loop
  vectorizer (TVM leaves the loop of a `T.vectorized` erf, log1p or atan serial);
- a vector form (`jitflow_expf_x8(float8)`) keeps a vectorized statement a vector statement, where
  lanes.py would otherwise split it lane by lane around libm calls.

Special values (inf, -inf, nan, -0, denormals, overflow, underflow) are those C99's Annex F gives,
as libm gives them. Only what a module calls is written (prelude.py), in dependency order, from
the templates of mathlib_c.py.
"""
from __future__ import annotations

import re

from .c_words import word
from .mathlib_c import FUNCTIONS

PREFIX = "jitflow_"
#: a vector form's name: the function's name and `_x<lanes>`
VECTOR_NAME = re.compile(rf"\b({PREFIX}\w+?)_x(\d+)\b")


#: libm's float32 name -> the definition standing in for it (what TIR's intrinsics and TVM's C rules call)
PUBLIC = {name: f"{PREFIX}{name}" for name, fn in FUNCTIONS.items() if name.endswith("f") and name != "ksincos"}
_CALL_RE = word(PREFIX, r"(\w+?)(?:_x(\d+))?\(")


def _forms(lanes: int) -> tuple[str, dict[str, str], str]:
    """(name suffix, the form's types, its conversion helpers) for a lane count (1: scalar)."""
    if lanes == 1:
        types = {"$F": "float", "$D": "double", "$L": "int64_t", "$U": "uint64_t", "$I": "int32_t",
                 "$V": "uint32_t"}
        conv = ("static inline double jitflow_f2d(float x) { return (double)x; }\n"
                "static inline float jitflow_d2f(double x) { return (float)x; }\n"
                "static inline int32_t jitflow_f2i(float x) { return (int32_t)x; }\n"
                "static inline float jitflow_i2f(int32_t x) { return (float)x; }")
        return "", types, conv
    n = lanes
    types = {"$F": f"float{n}", "$D": f"double{n}", "$L": f"int64_t{n}", "$U": f"uint64_t{n}",
             "$I": f"int32_t{n}", "$V": f"uint32_t{n}"}
    conv = "\n".join(f"static inline {dst} jitflow_{name}_x{n}({src} x) {{ return __builtin_convertvector(x, {dst}); }}"
                     for name, src, dst in [("f2d", f"float{n}", f"double{n}"), ("d2f", f"double{n}", f"float{n}"),
                                            ("f2i", f"float{n}", f"int32_t{n}"), ("i2f", f"int32_t{n}", f"float{n}")])
    return f"_x{n}", types, conv


_FALLBACK = {
    1: "#define JITFLOW_LIBM_FALLBACK(f, x, out) \\\n"
       "  if (!(__builtin_fabsf(x) < 0x1p19f)) out = f(x)",
    0: "#define JITFLOW_LIBM_FALLBACK_V(f, x, out, n) \\\n"
       "  if (__builtin_reduce_or((__builtin_elementwise_abs(x) >= 0x1p19f) | (x != x))) \\\n"
       "    for (int jitflow_i = 0; jitflow_i < n; ++jitflow_i) out[jitflow_i] = f(x[jitflow_i])",
}


def _closure(names: set[str]) -> list[str]:
    """Every definition `names` need, each after what it uses, in one fixed order."""
    out: list[str] = []

    def add(name: str) -> None:
        if name in out:
            return
        for dep in FUNCTIONS[name].uses:
            add(dep)
        out.append(name)

    for name in sorted(names):
        add(name)
    return out


def used(source: str) -> dict[int, set[str]]:
    """lanes (1: scalar) -> the public functions `source` calls in that form."""
    found: dict[int, set[str]] = {}
    if PREFIX not in source:
        return found
    for name, lanes in _CALL_RE.findall(source):
        if name in PUBLIC:
            found.setdefault(int(lanes) if lanes else 1, set()).add(name)
    return found


def call_count(source: str) -> int:
    """How many calls of these functions `source` makes, in any form (each inlines tens of instructions)."""
    if PREFIX not in source:
        return 0
    return sum(1 for name, _lanes in _CALL_RE.findall(source) if name in PUBLIC)


def definitions(source: str) -> str:
    """The C of every math function `source` calls, in each form it calls it, with what they need."""
    out = []
    for lanes, names in sorted(used(source).items()):
        suffix, types, conv = _forms(lanes)
        out.append(conv)
        for name in _closure(names):
            text = FUNCTIONS[name].body.strip()
            if lanes > 1:
                text = text.replace("JITFLOW_LIBM_FALLBACK(", "JITFLOW_LIBM_FALLBACK_V(").replace(
                    ", out);", f", out, {lanes});")
            for key, ctype in types.items():
                text = text.replace(key, ctype)
            out.append(text.replace("@", suffix))
    text = "\n".join(out)
    macros = [_FALLBACK[1 if key == "JITFLOW_LIBM_FALLBACK(" else 0]
              for key in ("JITFLOW_LIBM_FALLBACK(", "JITFLOW_LIBM_FALLBACK_V(") if key in text]
    return "\n".join([*macros, text]) + ("\n" if text else "")
