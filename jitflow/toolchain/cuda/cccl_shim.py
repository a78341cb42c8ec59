"""Minimal in-memory <cuda/std/cstdint> and <cuda/std/type_traits> for NVRTC.

TVM's CUDA prelude includes these two CCCL headers only to name fixed-width integers and a few
type traits; parsing the real CCCL headers costs NVRTC about a second per arch, the kernel itself
milliseconds. When a source includes nothing but these two headers (and self-contained ones of the
CUDA wheel, such as math_constants.h), NVRTC is given the small definitions below instead; any
other include means the real headers are used.
"""
from __future__ import annotations

import re

CSTDINT = """\
#pragma once
namespace cuda { namespace std {
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intmax_t;
typedef unsigned long long uintmax_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
}}
"""

TYPE_TRAITS = """\
#pragma once
namespace cuda { namespace std {
template <class T, T v> struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  typedef integral_constant type;
  constexpr operator value_type() const noexcept { return value; }
};
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <class T> struct _jf_integral : false_type {};
template <> struct _jf_integral<bool> : true_type {};
template <> struct _jf_integral<char> : true_type {};
template <> struct _jf_integral<signed char> : true_type {};
template <> struct _jf_integral<unsigned char> : true_type {};
template <> struct _jf_integral<wchar_t> : true_type {};
template <> struct _jf_integral<char16_t> : true_type {};
template <> struct _jf_integral<char32_t> : true_type {};
template <> struct _jf_integral<short> : true_type {};
template <> struct _jf_integral<unsigned short> : true_type {};
template <> struct _jf_integral<int> : true_type {};
template <> struct _jf_integral<unsigned int> : true_type {};
template <> struct _jf_integral<long> : true_type {};
template <> struct _jf_integral<unsigned long> : true_type {};
template <> struct _jf_integral<long long> : true_type {};
template <> struct _jf_integral<unsigned long long> : true_type {};
template <> struct _jf_integral<__int128> : true_type {};
template <> struct _jf_integral<unsigned __int128> : true_type {};
template <class T> struct is_integral : _jf_integral<typename remove_cv<T>::type> {};
template <class T> struct _jf_floating : false_type {};
template <> struct _jf_floating<float> : true_type {};
template <> struct _jf_floating<double> : true_type {};
template <> struct _jf_floating<long double> : true_type {};
template <class T> struct is_floating_point : _jf_floating<typename remove_cv<T>::type> {};
template <class T, bool = is_integral<T>::value || is_floating_point<T>::value>
struct _jf_signed : integral_constant<bool, (typename remove_cv<T>::type)(-1) < (typename remove_cv<T>::type)(0)> {};
template <class T> struct _jf_signed<T, false> : false_type {};
template <class T> struct is_signed : _jf_signed<T> {};
template <class T, bool = is_integral<T>::value || is_floating_point<T>::value>
struct _jf_unsigned : integral_constant<bool, (typename remove_cv<T>::type)(0) < (typename remove_cv<T>::type)(-1)> {};
template <class T> struct _jf_unsigned<T, false> : false_type {};
template <class T> struct is_unsigned : _jf_unsigned<T> {};
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
}}
"""

HEADERS = {"cuda/std/cstdint": CSTDINT, "cuda/std/type_traits": TYPE_TRAITS}
#: headers of the CUDA wheel that include nothing else (TVM's code includes math_constants.h for
#: CUDART_INF_F in an attention mask): NVRTC reads them from the wheel's include folder, in
#: milliseconds, so they do not call for the real CCCL headers either.
SELF_CONTAINED = frozenset({"math_constants.h"})
_INCLUDE_RE = re.compile(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", re.MULTILINE)
_RTC_BRANCH = re.compile(r"#ifdef __CUDACC_RTC__(.*?)#else(.*?)#endif", re.DOTALL)


def _included(source: str) -> set[str]:
    rtc_only = _RTC_BRANCH.sub(lambda m: m.group(1), source, count=1)
    return set(_INCLUDE_RE.findall(rtc_only))


def applies(source: str) -> bool:
    """True when every header NVRTC would read is one the shim provides or a self-contained one."""
    included = _included(source)
    return bool(included & set(HEADERS)) and included <= set(HEADERS) | SELF_CONTAINED


def needs_wheel_headers(source: str) -> bool:
    """Whether a source the shim applies to also reads a SELF_CONTAINED header from the wheel."""
    return bool(_included(source) & SELF_CONTAINED)
