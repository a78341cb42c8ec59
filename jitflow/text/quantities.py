"""Sizes, durations and plain numbers as people write them in settings and options ('2GB', '30d',
'0.5'), read exactly and bounded: a value past its limit is a typo, refused rather than rounded."""
from __future__ import annotations

import re
from decimal import Decimal

from ..errors import InvalidInputError

_SIZE_SUFFIXES = {"": 1, "B": 1, "K": 1000, "KB": 1000, "M": 1000**2, "MB": 1000**2, "G": 1000**3, "GB": 1000**3,
               "T": 1000**4, "TB": 1000**4, "P": 1000**5, "PB": 1000**5, "E": 1000**6, "EB": 1000**6,
               "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4, "PIB": 1024**5, "EIB": 1024**6}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

#: the largest values the parsers accept: a size that a file or a disk can have (8 EiB), a duration of a
#: century; beyond them a value is a typo, not a wish
MAX_BYTES = 2**63 - 1
MAX_SECONDS = 100 * 365 * 86400
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def _bounded(digits: str, scale: int, limit: float, label: str, limit_text: str) -> Decimal:
    """digits * scale as an exact Decimal, refused (not rounded to inf, not overflowing) beyond `limit`."""
    value = Decimal(digits) * scale
    if value > Decimal(limit):
        raise InvalidInputError(f"{label} is too large; at most {limit_text}")
    return value


def parse_size(text: str | int, what: str = "size") -> int:
    """'2GB', '500MB', '1.5GiB' or a number of bytes -> bytes, at most MAX_BYTES (8 EiB less one byte;
    KB to EB are powers of 1000, KiB to EiB of 1024). A size that is not a whole number of bytes
    ('1.5') is refused."""
    if isinstance(text, int) and not isinstance(text, bool):
        if not 0 <= text <= MAX_BYTES:
            raise InvalidInputError(f"{what} {text!r} is out of range; give 0 to {MAX_BYTES} bytes")
        return text
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _SIZE_SUFFIXES:
        raise InvalidInputError(f"{what} {text!r} is not a size; use for example 2GB, 500MB or 1.5GiB")
    value = _bounded(m.group(1), _SIZE_SUFFIXES[m.group(2).upper()], MAX_BYTES, f"{what} {text!r}",
                     "8 EiB less one byte")
    if value != int(value):
        raise InvalidInputError(f"{what} {text!r} is not a whole number of bytes; give bytes as a whole number "
                                "or use a unit (1.5KiB, 2MB)")
    return int(value)


def parse_duration(text: str, what: str = "duration") -> float:
    """'30d', '12h', '90m', '45s' -> seconds (at most a century)."""
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([smhdw])\s*", str(text))
    if not m:
        raise InvalidInputError(f"{what} {text!r} is not a duration; use for example 30d, 12h or 90m")
    return float(_bounded(m.group(1), _DURATION_UNITS[m.group(2)], MAX_SECONDS, f"{what} {text!r}", "100 years"))


def parse_number(text: str, what: str, maximum: float, whole: bool = False) -> float:
    """A positive decimal number written plainly ('2', '0.5'; no exponent, inf or nan), at most `maximum`."""
    m = re.fullmatch(rf"\s*({_NUMBER})\s*", str(text))
    kind = "a whole number" if whole else "a number"
    if not m or (whole and "." in m.group(1)):
        raise InvalidInputError(f"{what}={text!r} is not {kind}; give a positive one, at most {maximum:g}")
    value = _bounded(m.group(1), 1, maximum, f"{what}={text!r}", f"{maximum:g}")
    if value <= 0:
        raise InvalidInputError(f"{what}={text!r} is not a positive number")
    return float(value)
