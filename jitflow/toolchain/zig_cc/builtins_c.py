"""The compiler builtins TVM's host C needs on x86-64, as C: half-precision conversions.

x86-64's baseline has no instruction for float16, so clang turns every `_Float16` conversion into a
call to compiler-rt's __extendhfsf2 / __truncsfhf2 / __truncdfhf2. zig would build its whole
compiler runtime for three functions (seconds, once per machine); these definitions take
milliseconds to compile. They convert bit patterns with integer arithmetic (IEEE 754 binary16,
round to nearest even, subnormals, infinities, NaNs kept quiet), so they never call themselves.
Hidden visibility: a library uses them but never exports them.
"""
from __future__ import annotations

#: the symbols SOURCE defines; any other compiler-rt builtin makes the link use zig's compiler runtime.
PROVIDES = frozenset({"__extendhfsf2", "__truncsfhf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee"})

SOURCE = r"""
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
#define HIDDEN __attribute__((visibility("hidden")))

static u16 round_shift(u64 value, int shift) {       /* value >> shift, rounded to nearest even */
    u64 kept = value >> shift, rest = value & ((1ULL << shift) - 1), half = 1ULL << (shift - 1);
    return (u16)(kept + (rest > half || (rest == half && (kept & 1))));
}

/* A non-negative finite value m * 2^e (m < 2^53, normalized to its top bit at 52) as binary16 bits. */
static u16 to_half(u64 mant, int exp, u16 sign) {
    if (exp > 15) return sign | 0x7c00;                            /* beyond 2^16: infinity */
    if (exp >= -14) {              /* normal: a carry out of the 10 fraction bits raises the exponent */
        u32 bits = ((u32)(exp + 15) << 10) + round_shift(mant & ((1ULL << 52) - 1), 42);
        return sign | (bits >= 0x7c00 ? 0x7c00 : (u16)bits);
    }
    if (exp < -25) return sign;                                   /* below half the smallest subnormal */
    return sign | round_shift(mant, 42 + (-14 - exp));            /* subnormal, may round up to normal */
}

static u16 f64_bits_to_half(u64 x) {
    u16 sign = (u16)((x >> 48) & 0x8000);
    u64 abs = x & 0x7fffffffffffffffULL;
    int exp = (int)(abs >> 52);
    if (exp == 0x7ff) return sign | 0x7c00 | (abs & 0xfffffffffffffULL ? 0x200 | (u16)((abs >> 42) & 0x3ff) : 0);
    if (exp == 0) return sign;                                    /* zero or double subnormal: far below */
    return to_half((abs & 0xfffffffffffffULL) | (1ULL << 52), exp - 1023, sign);
}

static u16 f32_bits_to_half(u32 x) {
    u16 sign = (u16)((x >> 16) & 0x8000);
    u32 abs = x & 0x7fffffff;
    int exp = (int)(abs >> 23);
    if (exp == 0xff) return sign | 0x7c00 | (abs & 0x7fffff ? 0x200 | (u16)((abs >> 13) & 0x3ff) : 0);
    if (exp == 0) return sign;                                    /* zero or float subnormal: below 2^-126 */
    return to_half(((u64)(abs & 0x7fffff) | 0x800000) << 29, exp - 127, sign);
}

static u32 half_to_f32_bits(u16 h) {
    u32 sign = (u32)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return sign | 0x7f800000 | (mant << 13) | (mant ? 0x400000 : 0);
    if (exp == 0) {
        if (mant == 0) return sign;
        exp = 113;
        while (!(mant & 0x400)) { mant <<= 1; exp--; }            /* normalize a subnormal */
        return sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
    return sign | ((exp + 112) << 23) | (mant << 13);
}

/* NAME(in) -> out: the argument's bits, converted by BITS_FN, returned as the result's bits */
#define CONVERSION(NAME, OUT, IN, IN_BITS, OUT_BITS, BITS_FN) \
    HIDDEN OUT NAME(IN a) { \
        IN_BITS in; OUT_BITS bits; OUT out; \
        __builtin_memcpy(&in, &a, sizeof in); \
        bits = BITS_FN(in); \
        __builtin_memcpy(&out, &bits, sizeof out); \
        return out; \
    }
CONVERSION(__extendhfsf2, float, _Float16, u16, u32, half_to_f32_bits)
CONVERSION(__truncsfhf2, _Float16, float, u32, u16, f32_bits_to_half)
CONVERSION(__truncdfhf2, _Float16, double, u64, u16, f64_bits_to_half)

HIDDEN float __gnu_h2f_ieee(_Float16 a) { return __extendhfsf2(a); }
HIDDEN _Float16 __gnu_f2h_ieee(float a) { return __truncsfhf2(a); }
"""
