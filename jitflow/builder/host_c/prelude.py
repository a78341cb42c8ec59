"""The typed C prelude put in front of TVM's host C: the definitions its printer uses but never writes.

TVM's C printer names vector types (`float4`, `int32_t8`, `half16`), builds vectors with a
constructor call (`int32_t4(a, b, c, d)`) and reads lanes as `v.s3`; it names float16 `half`.
zig's clang understands all of that once the types exist: they are clang ext_vector_type
vectors (lanes, `.sN`, element-wise operators and `?:`), typedef'd with the element's alignment
so that TVM's `*(float4*)(A + i)` loads and stores are safe at any element offset.

The IR pass (legalize.py) rewrites what C cannot say with those types into calls of the
`jitflow_*` helpers below. What depends on the module (the vector types it names, vector
conversions, static handles, the math functions of mathlib.py) is written only when the C source
uses it, so the prelude of a kernel without vectors or math is a few lines. This text is part of how
a library is built, so it is covered by the cache key with the rest of jitflow/builder.
"""
from __future__ import annotations

import re

from . import mathlib
from .c_words import word, words

#: (DLPack type code, bits) -> C element type, for every element type the prelude has vectors of.
ELEMENTS = {(0, 8): "int8_t", (0, 16): "int16_t", (0, 32): "int32_t", (0, 64): "int64_t",
            (1, 8): "uint8_t", (1, 16): "uint16_t", (1, 32): "uint32_t", (1, 64): "uint64_t",
            (2, 16): "half", (2, 32): "float", (2, 64): "double"}
#: Lane counts of the prelude's vector types (TVM's C printer names 2 to 16). 3 is left out: clang
#: loads and stores a 3-lane vector as 4 lanes, past the end of a buffer. Other counts are split by
#: the IR pass (lanes.py: into vectors of these, or into scalars).
LANES = tuple(n for n in range(2, 17) if n != 3)

CONVERT_PREFIX = "jitflow_cvt_"
VLOAD_PREFIX = "jitflow_vload_"
STATIC_HANDLE_PREFIX = "jitflow_static_handle_"
MARK = "/* jitflow C prelude */"
END_MARK = "/* end of jitflow C prelude */"

_FIXED_HELPERS = r"""
static inline half jitflow_f16_from_bits(int16_t b) { half v; __builtin_memcpy(&v, &b, 2); return v; }
static inline float jitflow_f32_from_bits(int32_t b) { float v; __builtin_memcpy(&v, &b, 4); return v; }
static inline double jitflow_f64_from_bits(int64_t b) { double v; __builtin_memcpy(&v, &b, 8); return v; }
static inline double jitflow_exp10(double x) { return pow(10.0, x); }
static inline int32_t jitflow_clz32(uint32_t x) { return x ? __builtin_clz(x) : 32; }
static inline int32_t jitflow_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }
static inline int32_t jitflow_popcount32(uint32_t x) { return __builtin_popcount(x); }
static inline int32_t jitflow_popcount64(uint64_t x) { return __builtin_popcountll(x); }
void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) __attribute__((malloc));
"""
# TVMBackendAllocWorkspace is redeclared `malloc`: TVM's workspace pool hands out memory nothing else
# points to until it is freed, and clang then knows a workspace buffer is not an argument's memory
# (TVM's LLVM host tells LLVM as much through its alias metadata). Without it a tuned conv2d whose
# accumulators live in its output stored them on every step of the reduction beside reads of its
# staged input, 2x slower than LLVM's build of it.


def element_c_type(code: int, bits: int) -> str | None:
    """The C type of one element of a DLPack (code, bits), or None when the prelude has none."""
    return ELEMENTS.get((code, bits))


def has_c_type(dtype) -> bool:
    """Whether TVM's C printer can name `dtype` with the prelude: a scalar, or a vector of its types."""
    if dtype.lanes == 1:
        return True
    return dtype.lanes in LANES and (dtype.type_code, dtype.bits) in ELEMENTS


def convert_helper(dst, src) -> str:
    """Name of the helper converting a vector of dtype `src` to `dst` lane by lane."""
    return f"{CONVERT_PREFIX}{dst}_{src}"


def min_max_helper(which: str, dtype) -> str | None:
    """Name of the helper computing TIR's `which` ("min" or "max") of two values of `dtype`, each
    operand evaluated once, as TVM's LLVM host does (a select on < or >); None where C has no type."""
    element = _SCALAR_NAMES.get((dtype.type_code, dtype.bits))
    if element is None or (dtype.lanes > 1 and (dtype.lanes not in LANES or element not in _BITS_OF)):
        return None
    return f"{mathlib.PREFIX}{which}_{element}" + (f"_x{dtype.lanes}" if dtype.lanes > 1 else "")


def vector_load(dtype) -> str:
    """Name of the helper reading a vector of `dtype` from consecutive elements at a pointer."""
    return f"{VLOAD_PREFIX}{ELEMENTS[(dtype.type_code, dtype.bits)]}{dtype.lanes}"


_BITS_OF = {name: bits for (_, bits), name in ELEMENTS.items()}
#: scalar C types TIR's min and max may take (bool is DLPack's uint1)
_SCALAR_NAMES = {**ELEMENTS, (1, 1): "bool"}
_LANE_COUNTS = "|".join(str(n) for n in sorted(LANES, reverse=True))
#: a vector type's name (words() finds those that start a word)
_VECTOR_TYPE_RE = re.compile(rf"({'|'.join(ELEMENTS.values())})({_LANE_COUNTS})\b")


def vector_types(*texts: str) -> str:
    """The typedefs (and constructor macros) of the prelude's vector types that `texts` name."""
    found = sorted({(name, int(lanes)) for text in texts for name, lanes in (m.groups() for m in words(_VECTOR_TYPE_RE, text))})
    lines = []
    for name, lanes in found:
        vec = f"{name}{lanes}"
        lines.append(f"typedef {name} {vec} __attribute__((ext_vector_type({lanes}), aligned({_BITS_OF[name] // 8})));")
        lines.append(f"#define {vec}(...) (({vec}){{__VA_ARGS__}})")
    return "\n".join(lines) + ("\n" if lines else "")


PRELUDE = "\n".join([MARK, "#include <stdint.h>", "#include <math.h>", "typedef _Float16 half;",
                     _FIXED_HELPERS.strip(), ""])

_DTYPE = rf"(?:u?int(?:8|16|32|64)|float(?:16|32|64))x(?:{_LANE_COUNTS})"
_CONVERT_RE = word(CONVERT_PREFIX, rf"({_DTYPE})_({_DTYPE})\b")
_HANDLE_RE = word(STATIC_HANDLE_PREFIX, r"(\d+)\b")
_VLOAD_RE = word(VLOAD_PREFIX, r"(\w+)\(")
_MIN_MAX_RE = word(mathlib.PREFIX, r"(min|max)_([a-z0-9_]+?)(?:_x(\d+))?\(")
_DTYPE_PARTS = re.compile(r"(u?int|float)(\d+)x(\d+)")


def _c_vector(dtype: str) -> str:
    kind, bits, lanes = _DTYPE_PARTS.fullmatch(dtype).groups()
    code = {"int": 0, "uint": 1, "float": 2}[kind]
    return f"{ELEMENTS[(code, int(bits))]}{lanes}"


def module_helpers(source: str) -> str:
    """Definitions of the module-specific helpers the C source calls (conversions, vector loads, min and
    max, static handles)."""
    out = []
    converts = _CONVERT_RE.findall(source) if CONVERT_PREFIX in source else []   # a search is far cheaper
    handles = _HANDLE_RE.findall(source) if STATIC_HANDLE_PREFIX in source else []
    for dst, src in sorted(set(converts)):
        cdst, csrc = _c_vector(dst), _c_vector(src)
        out.append(f"static inline {cdst} {convert_helper(dst, src)}({csrc} v) "
                   f"{{ return __builtin_convertvector(v, {cdst}); }}")
    for vec in sorted(set(_VLOAD_RE.findall(source)) if VLOAD_PREFIX in source else ()):
        element = vec.rstrip("0123456789")           # TVM declares the call with the element's pointer type
        out.append(f"static inline {vec} {VLOAD_PREFIX}{vec}({element}* p) {{ return *({vec}*)p; }}")
    for which, element, lanes in sorted(set(_MIN_MAX_RE.findall(source))):
        if element not in _SCALAR_NAMES.values():
            continue
        ctype, suffix = (f"{element}{lanes}", f"_x{lanes}") if lanes else (element, "")
        op = ">" if which == "max" else "<"
        out.append(f"static inline {ctype} {mathlib.PREFIX}{which}_{element}{suffix}({ctype} a, {ctype} b) "
                   f"{{ return a {op} b ? a : b; }}")
    for n in sorted({int(n) for n in handles}):
        out.append(f"static void* {STATIC_HANDLE_PREFIX}slot_{n} = (void*)0;")
        out.append(f"static inline void* {STATIC_HANDLE_PREFIX}{n}(void) {{ return &{STATIC_HANDLE_PREFIX}slot_{n}; }}")
    return "\n".join(out) + ("\n" if out else "")


def uses_vectors(host_c: str) -> bool:
    """Whether a host C source's prelude defines vector types or math (what a CPU level speeds up)."""
    head = host_c.partition(END_MARK)[0]
    return "ext_vector_type" in head or mathlib.PREFIX + "f2d" in head


def prelude_for(source: str) -> str:
    """The prelude for one host C source: the fixed definitions, the vector types it and its helpers
    name, the helpers it calls and the math functions it calls (mathlib.py)."""
    helpers = module_helpers(source)
    math = mathlib.definitions(source)
    return PRELUDE + vector_types(source, helpers, math) + helpers + math + END_MARK + "\n"
