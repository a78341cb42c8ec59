"""The C of the C host's float32 math (mathlib.py writes it out): one template per function.

The text of every function is a template: `$F`, `$D`, `$L`, `$U`, `$I`, `$V` are the float, double,
int64, uint64, int32 and uint32 types of the form (`float` or `float8`...) and `@` is its name suffix
(`` or `_x8`). Integer arithmetic that may wrap is unsigned: the scalar forms are C, where signed
overflow is undefined. Kernels in double (`k...`) are internal; the float functions are what TIR's
intrinsics map to.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Function:
    """One definition: its C template, the definitions it calls, and whether it is public (an intrinsic)."""

    body: str
    uses: tuple[str, ...] = ()


def _poly(var: str, coeffs: list[float]) -> str:
    """sum(coeffs[i] * var**i) by Estrin's scheme (pairs, then pairs of pairs with var squared, ...), the
    constants written exactly (hex floats). Its chains of dependent steps are about half as long as
    Horner's, and in double on 128-bit vectors the latency of those chains is what bounds the speed."""
    terms = [float(c).hex() for c in coeffs]
    power = var
    while len(terms) > 1:
        pairs = [f"({terms[i]} + {power} * {terms[i + 1]})" for i in range(0, len(terms) - 1, 2)]
        terms = pairs + terms[len(pairs) * 2:]
        power = f"({power} * {power})"
    return terms[0]


#: e^r on |r| <= 0.35 (past ln2/2): a Chebyshev fit of degree 8, 1.2e-12 relative
_EXP_POLY = [float.fromhex(h) for h in (
    "0x1.0000000000043p+0", "0x1.ffffffffcfe57p-1", "0x1.ffffffffe5455p-2", "0x1.555555a721aa9p-3",
    "0x1.5555558be5b49p-5", "0x1.11107ade0c7bbp-7", "0x1.6c16259957fe0p-10", "0x1.a1b27afb6cb25p-13",
    "0x1.a18524adfd7cdp-16")]
_EXPM1_TAYLOR = [1.0 / math.factorial(n) for n in range(1, 14)]       # |y| <= 0.3, times y
_LOG_SERIES = [1.0 / (2 * n + 1) for n in range(1, 8)]                # s^2 <= 0.0295: 1.3e-13 relative
_SIN_TAYLOR = [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, 9)]
_COS_TAYLOR = [(-1) ** n / math.factorial(2 * n) for n in range(0, 9)]
_ATAN_SERIES = [(-1) ** n / (2 * n + 1) for n in range(1, 17)]        # |c| <= tan(pi/8)
_SINH_TAYLOR = [1.0 / math.factorial(2 * n + 1) for n in range(1, 8)]  # |x| < 0.5
_ERF_TAYLOR = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(15)]
#: erfc(x) * exp(x*x) on [0.84375, 4] in t = (x - 2.421875) / 1.578125: a Chebyshev fit, 2.4e-12 relative
_ERFC_Q = [float.fromhex(h) for h in (
    "0x1.bbf25d9a70858p-3", "-0x1.fabf3c256c2aep-4", "0x1.127b4f0b7871cp-4", "-0x1.1bf4f8574b579p-5",
    "0x1.19e459c21554dp-6", "-0x1.0d95822fa5486p-7", "0x1.f250b74050d3ap-9", "-0x1.be48125aaff1ep-10",
    "0x1.842de780aa91ap-11", "-0x1.48a6f8f0428a8p-12", "0x1.0f2d0c5b10119p-13", "-0x1.b30eff7236139p-15",
    "0x1.565ad4167b166p-16", "-0x1.12c539492078fp-17", "0x1.a02d739b37479p-19", "-0x1.c781d1e82caacp-21",
    "0x1.45d67a9b650f2p-22", "-0x1.15219b659cdaap-22", "0x1.88fb0618f6a52p-24")]

_INF = "__builtin_inf()"
_NAN = "__builtin_nan(\"\")"

#: kernels in double (internal) and the float functions TIR's intrinsics map to (public).
FUNCTIONS: dict[str, Function] = {
    # e^y for any double y (clamped to +-160: the float results are then 0 or inf), nan kept
    "kexp": Function(f"""
static inline $D jitflow_kexp@($D y) {{
  y = y > 160.0 ? 160.0 : y;
  y = y < -160.0 ? -160.0 : y;
  $D kd = y * 0x1.71547652b82fep0 + 0x1.8p52;
  $L ki = __builtin_bit_cast($L, kd);
  kd = kd - 0x1.8p52;
  $D r = (y - kd * 0x1.62e42feep-1) - kd * 0x1.a39ef35793c76p-33;
  $D scale = __builtin_bit_cast($D, (($U)ki - 0x4338000000000000ULL + 1023) << 52);
  return {_poly("r", _EXP_POLY)} * scale;
}}"""),
    # e^y - 1, exact near 0
    "kexpm1": Function(f"""
static inline $D jitflow_kexpm1@($D y) {{
  $D small = y * {_poly("y", _EXPM1_TAYLOR)};
  return (y < 0.3 && y > -0.3) ? small : jitflow_kexp@(y) - 1.0;
}}""", ("kexp",)),
    # log(x) for a positive, finite double
    "klog": Function(f"""
static inline $D jitflow_klog@($D x) {{
  $L ix = __builtin_bit_cast($L, x);
  $L e = ($L)((($U)ix - 0x3fe6a09e667f3bcdULL + 0x4000000000000000ULL) >> 52) - 1024;
  $D m = __builtin_bit_cast($D, ($U)ix - (($U)e << 52));
  $D ed = __builtin_bit_cast($D, e + 0x4338000000000000LL) - 0x1.8p52;
  $D f = m - 1.0;
  $D s = f / (2.0 + f);
  $D z = s * s;
  $D twos = 2.0 * s;
  return ed * 0x1.62e42fefa39efp-1 + (twos + twos * (z * {_poly("z", _LOG_SERIES)}));
}}"""),
    # log(x) for any double, with C99's special values
    "klogx": Function(f"""
static inline $D jitflow_klogx@($D x) {{
  $D r = jitflow_klog@(x);
  r = x == 0.0 ? -{_INF} : r;
  r = x < 0.0 ? {_NAN} : r;
  r = x == {_INF} ? x : r;
  return x != x ? x : r;
}}""", ("klog",)),
    # log(1 + w) for any double, exact near 0
    "klog1p": Function(f"""
static inline $D jitflow_klog1p@($D w) {{
  $D u = 1.0 + w;
  $D r = jitflow_klogx@(u) * (w / (u - 1.0));
  r = u == 1.0 ? w : r;
  r = w == -1.0 ? -{_INF} : r;
  return w == {_INF} ? w : r;
}}""", ("klogx",)),
    # atan(|x|) for a double
    "katan": Function(f"""
static inline $D jitflow_katan@($D a) {{
  a = __builtin_elementwise_abs(a);
  $D b = a > 1.0 ? 1.0 / a : a;
  $D c = b > 0x1.a827999fcef32p-2 ? (b - 1.0) / (b + 1.0) : b;
  $D z = c * c;
  $D r = c + c * (z * {_poly("z", _ATAN_SERIES)});
  r = b > 0x1.a827999fcef32p-2 ? 0x1.921fb54442d18p-1 + r : r;
  return a > 1.0 ? 0x1.921fb54442d18p0 - r : r;
}}"""),
    # a double result of pow (>= 0, or nan) rounded to float with exact ties to even: within `tol`
    # (relative, above the approximation's error) of a number of 25 significant bits (Veltkamp's
    # split) it is taken as that number, so a result exactly halfway between two floats (2^-150,
    # 9 * 2^-150, 4097^2), which the double misses in its last bits, rounds to the even one
    "kround": Function("""
static inline $F jitflow_kround@($D r, double tol) {
  $D c = r * 0x1.0000001p28;
  $D near = c - (c - r);
  return jitflow_d2f@(__builtin_elementwise_abs(r - near) <= r * tol ? near : r);
}"""),
    "expf": Function("""
static inline $F jitflow_expf@($F x) { return jitflow_d2f@(jitflow_kexp@(jitflow_f2d@(x))); }""", ("kexp",)),
    "exp2f": Function("""
static inline $F jitflow_exp2f@($F x) {
  $F r = jitflow_d2f@(jitflow_kexp@(jitflow_f2d@(x) * 0x1.62e42fefa39efp-1));
  return x == -150.0f ? ($F)0.0f : r;   /* its one exact tie: 2^-150, halfway from 0 to 2^-149, to even */
}""", ("kexp",)),
    "exp10f": Function("""
static inline $F jitflow_exp10f@($F x) {
  return jitflow_d2f@(jitflow_kexp@(jitflow_f2d@(x) * 0x1.26bb1bbb55516p1));
}""", ("kexp",)),
    "logf": Function("""
static inline $F jitflow_logf@($F x) { return jitflow_d2f@(jitflow_klogx@(jitflow_f2d@(x))); }""", ("klogx",)),
    "log2f": Function("""
static inline $F jitflow_log2f@($F x) {
  return jitflow_d2f@(jitflow_klogx@(jitflow_f2d@(x)) * 0x1.71547652b82fep0);
}""", ("klogx",)),
    "log10f": Function("""
static inline $F jitflow_log10f@($F x) {
  return jitflow_d2f@(jitflow_klogx@(jitflow_f2d@(x)) * 0x1.bcb7b1526e50ep-2);
}""", ("klogx",)),
    "log1pf": Function("""
static inline $F jitflow_log1pf@($F x) { return jitflow_d2f@(jitflow_klog1p@(jitflow_f2d@(x))); }""", ("klog1p",)),
    "tanhf": Function("""
static inline $F jitflow_tanhf@($F x) {
  $D d = jitflow_f2d@(x);
  $D a = __builtin_elementwise_abs(d);
  a = a > 9.5 ? 9.5 : a;
  $D t = jitflow_kexpm1@(2.0 * a);
  return jitflow_d2f@(__builtin_elementwise_copysign(t / (t + 2.0), d));
}""", ("kexpm1",)),
    "sinhf": Function(f"""
static inline $F jitflow_sinhf@($F x) {{
  $D d = jitflow_f2d@(x);
  $D a = __builtin_elementwise_abs(d);
  $D z = d * d;
  $D small = d + d * (z * {_poly("z", _SINH_TAYLOR)});
  $D e = jitflow_kexp@(a);
  $D big = __builtin_elementwise_copysign(0.5 * (e - 1.0 / e), d);
  return jitflow_d2f@(a < 0.5 ? small : big);
}}""", ("kexp",)),
    "coshf": Function("""
static inline $F jitflow_coshf@($F x) {
  $D e = jitflow_kexp@(__builtin_elementwise_abs(jitflow_f2d@(x)));
  return jitflow_d2f@(0.5 * (e + 1.0 / e));
}""", ("kexp",)),
    "erff": Function(f"""
static inline $F jitflow_erff@($F x) {{
  $D d = jitflow_f2d@(x);
  $D a = __builtin_elementwise_abs(d);
  a = a > 4.0 ? 4.0 : a;
  $D z = a * a;
  $D small = a * {_poly("z", _ERF_TAYLOR)};
  $D t = (a - 2.421875) * 0x1.446f86562d9fbp-1;
  $D big = 1.0 - jitflow_kexp@(-z) * {_poly("t", _ERFC_Q)};
  return jitflow_d2f@(__builtin_elementwise_copysign(a < 0.84375 ? small : big, d));
}}""", ("kexp",)),
    "powf": Function(f"""
static inline $F jitflow_powf@($F x, $F y) {{
  $D e = jitflow_kexp@(jitflow_f2d@(y) * jitflow_klogx@(jitflow_f2d@(__builtin_elementwise_abs(x))));
  $F r = jitflow_kround@(e, 0x1.6a09e667f3bcdp-39);   /* 2^-38.5: twice its largest error at a tie */
  $F ay = __builtin_elementwise_abs(y), yt = jitflow_truncf@(y);
  $I odd = (yt == y) & (ay < 0x1p24f) & ((jitflow_f2i@(ay < 0x1p24f ? yt : ($F)0.0f) & 1) != 0);
  $F sign = (odd & (__builtin_elementwise_copysign(($F)1.0f, x) < 0.0f)) != 0 ? ($F)-1.0f : ($F)1.0f;
  sign = ((x < 0.0f) & (x > -{_INF}) & (yt != y)) != 0 ? ($F){_NAN} : sign;
  r = r * sign;
  return ((y == 0.0f) | (x == 1.0f) | ((x == -1.0f) & (ay == {_INF}))) != 0 ? ($F)1.0f : r;
}}""", ("kexp", "klogx", "kround", "truncf")),
    "atanf": Function("""
static inline $F jitflow_atanf@($F x) {
  $D d = jitflow_f2d@(x);
  return jitflow_d2f@(__builtin_elementwise_copysign(jitflow_katan@(d), d));
}""", ("katan",)),
    "asinf": Function("""
static inline $F jitflow_asinf@($F x) {
  $D d = jitflow_f2d@(x);
  $D r = jitflow_katan@(d / __builtin_elementwise_sqrt(1.0 - d * d));
  return jitflow_d2f@(__builtin_elementwise_copysign(r, d));
}""", ("katan",)),
    "acosf": Function("""
static inline $F jitflow_acosf@($F x) {
  $D d = jitflow_f2d@(x);
  $D q = (1.0 - d) / (1.0 + d);
  $D r = 2.0 * jitflow_katan@(__builtin_elementwise_sqrt(q));
  return jitflow_d2f@(q != q ? q : r);
}""", ("katan",)),
    "atan2f": Function(f"""
static inline $F jitflow_atan2f@($F y, $F x) {{
  $D dy = jitflow_f2d@(y), dx = jitflow_f2d@(x);
  $D ay = __builtin_elementwise_abs(dy), ax = __builtin_elementwise_abs(dx);
  $D r = jitflow_katan@(ay / ax);
  r = (ay == {_INF} & ax == {_INF}) ? 0x1.921fb54442d18p-1 : r;
  r = (ay == 0.0 & ax == 0.0) ? 0.0 : r;
  r = __builtin_elementwise_copysign(($D)1.0, dx) < 0.0 ? 0x1.921fb54442d18p1 - r : r;
  return jitflow_d2f@(__builtin_elementwise_copysign(r, dy));
}}""", ("katan",)),
    "asinhf": Function(f"""
static inline $F jitflow_asinhf@($F x) {{
  $D d = jitflow_f2d@(x);
  $D a = __builtin_elementwise_abs(d);
  $D r = jitflow_klog1p@(a + a * a / (1.0 + __builtin_elementwise_sqrt(1.0 + a * a)));
  r = a == {_INF} ? a : r;
  return jitflow_d2f@(__builtin_elementwise_copysign(r, d));
}}""", ("klog1p",)),
    "acoshf": Function(f"""
static inline $F jitflow_acoshf@($F x) {{
  $D d = jitflow_f2d@(x);
  $D m = d - 1.0;
  $D r = jitflow_klog1p@(m + __builtin_elementwise_sqrt(m * (d + 1.0)));
  r = d == {_INF} ? d : r;
  return jitflow_d2f@(d < 1.0 ? {_NAN} : r);
}}""", ("klog1p",)),
    "atanhf": Function(f"""
static inline $F jitflow_atanhf@($F x) {{
  $D d = jitflow_f2d@(x);
  $D a = __builtin_elementwise_abs(d);
  $D r = 0.5 * jitflow_klog1p@(2.0 * a / (1.0 - a));
  r = a == 1.0 ? {_INF} : r;
  return jitflow_d2f@(__builtin_elementwise_copysign(a > 1.0 ? {_NAN} : r, d));
}}""", ("klog1p",)),
    "hypotf": Function(f"""
static inline $F jitflow_hypotf@($F x, $F y) {{
  $D dx = jitflow_f2d@(x), dy = jitflow_f2d@(y);
  $D r = __builtin_elementwise_sqrt(dx * dx + dy * dy);
  return jitflow_d2f@((__builtin_elementwise_abs(dx) == {_INF} | __builtin_elementwise_abs(dy) == {_INF})
                      ? {_INF} : r);
}}"""),
    "nextafterf": Function("""
static inline $F jitflow_nextafterf@($F x, $F y) {
  $V ix = __builtin_bit_cast($V, x);
  $F r = __builtin_bit_cast($F, ((y > x) == (x > 0.0f)) ? ix + 1u : ix - 1u);
  r = x == 0.0f ? __builtin_bit_cast($F, (__builtin_bit_cast($I, y) & (int32_t)0x80000000) | 1) : r;
  r = x == y ? y : r;
  return (x != x | y != y) ? x + y : r;
}"""),
    # sin, cos and tan share the reduction: x = k * pi/2 + r, |r| <= pi/4, exact for |x| < 2^19
    "ksincos": Function(f"""
static inline $D jitflow_ksin@($D r) {{ $D z = r * r; return r * (1.0 + z * {_poly("z", _SIN_TAYLOR)}); }}
static inline $D jitflow_kcos@($D r) {{ $D z = r * r; return {_poly("z", _COS_TAYLOR)}; }}
static inline $D jitflow_kreduce@($D d, $L* q) {{
  $D kd = d * 0x1.45f306dc9c883p-1 + 0x1.8p52;
  *q = __builtin_bit_cast($L, kd);
  kd = kd - 0x1.8p52;
  return ((d - kd * 0x1.921fb544p0) - kd * 0x1.0b4611a6p-34) - kd * 0x1.3198a2e037073p-69;
}}
/* a where bit 0 of q is clear, else b; its sign flipped where bit 1 of q is set (bit operations only) */
static inline $D jitflow_kquadrant@($D a, $D b, $L q) {{
  $L pick = -(q & 1);
  $L v = (__builtin_bit_cast($L, b) & pick) | (__builtin_bit_cast($L, a) & ~pick);
  return __builtin_bit_cast($D, ($U)v ^ ((($U)q & 2) << 62));
}}"""),
    "sinf": Function("""
static inline $F jitflow_sinf@($F x) {
  $D d = jitflow_f2d@(x);
  $L q;
  $D r = jitflow_kreduce@(d, &q);
  $F out = jitflow_d2f@(jitflow_kquadrant@(jitflow_ksin@(r), jitflow_kcos@(r), q));
  JITFLOW_LIBM_FALLBACK(sinf, x, out);
  return out;
}""", ("ksincos",)),
    "cosf": Function("""
static inline $F jitflow_cosf@($F x) {
  $D d = jitflow_f2d@(x);
  $L q;
  $D r = jitflow_kreduce@(d, &q);
  $F out = jitflow_d2f@(jitflow_kquadrant@(jitflow_kcos@(r), -jitflow_ksin@(r), q));
  JITFLOW_LIBM_FALLBACK(cosf, x, out);
  return out;
}""", ("ksincos",)),
    "tanf": Function("""
static inline $F jitflow_tanf@($F x) {
  $D d = jitflow_f2d@(x);
  $L q;
  $D r = jitflow_kreduce@(d, &q);
  $D s = jitflow_ksin@(r), c = jitflow_kcos@(r);
  $F out = jitflow_d2f@(jitflow_kquadrant@(s, -c, q & 1) / jitflow_kquadrant@(c, s, q & 1));
  JITFLOW_LIBM_FALLBACK(tanf, x, out);
  return out;
}""", ("ksincos",)),
    # floor, ceil, trunc and round-half-even: one instruction from SSE4.1 and on aarch64, else from an
    # integer conversion (|x| < 2^23: every larger float is an integer); the results are the same
    "truncf": Function("""
static inline $F jitflow_truncf@($F x) {
#if defined(__SSE4_1__) || defined(__aarch64__)
  return __builtin_elementwise_trunc(x);
#else
  $F a = __builtin_elementwise_abs(x);
  $F t = jitflow_i2f@(jitflow_f2i@(a < 0x1p23f ? x : ($F)0.0f));   /* in range: no undefined conversion */
  return a < 0x1p23f ? __builtin_elementwise_copysign(t, x) : x;
#endif
}"""),
    "floorf": Function("""
static inline $F jitflow_floorf@($F x) {
#if defined(__SSE4_1__) || defined(__aarch64__)
  return __builtin_elementwise_floor(x);
#else
  $F t = jitflow_truncf@(x);
  return t > x ? t - 1.0f : t;
#endif
}""", ("truncf",)),
    "ceilf": Function("""
static inline $F jitflow_ceilf@($F x) {
#if defined(__SSE4_1__) || defined(__aarch64__)
  return __builtin_elementwise_ceil(x);
#else
  $F t = jitflow_truncf@(x);
  return t < x ? t + 1.0f : t;
#endif
}""", ("truncf",)),
    "nearbyintf": Function("""
static inline $F jitflow_nearbyintf@($F x) {
#if defined(__SSE4_1__) || defined(__aarch64__)
  return __builtin_elementwise_roundeven(x);
#else
  $F a = __builtin_elementwise_abs(x);
  $F t = (a + 0x1p23f) - 0x1p23f;
  return a < 0x1p23f ? __builtin_elementwise_copysign(t, x) : x;
#endif
}"""),
    "sqrtf": Function("""
static inline $F jitflow_sqrtf@($F x) { return __builtin_elementwise_sqrt(x); }"""),
    "fabsf": Function("""
static inline $F jitflow_fabsf@($F x) { return __builtin_elementwise_abs(x); }"""),
    "copysignf": Function("""
static inline $F jitflow_copysignf@($F x, $F y) { return __builtin_elementwise_copysign(x, y); }"""),
}
