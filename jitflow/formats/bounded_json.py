"""JSON from bytes that someone else may have written (a cache entry's metadata, a shared entry's
header): bounded in size and in nesting before it is parsed.

`json.loads` recurses once per level: a document nested 100000 deep raises RecursionError, and
one nested a few hundred deep parses but makes every later walk over it (comparisons, dumps) a
risk. The nesting is measured first, on the text with its strings taken out, so a refused
document is never handed to the parser. Every refusal is a `BadJSON` (a ValueError) that says why.
"""
from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: a JSON string literal (escapes included), and the brackets that open or close a level
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class BadJSON(ValueError):
    """The bytes are not JSON within the limits (too large, nested too deep, or malformed)."""


def nesting(data: bytes) -> int:
    """How deep the arrays and objects of `data` nest (0 for a scalar), strings not counted."""
    brackets = _BRACKET.findall(_STRING.sub(b'""', data))
    return max(accumulate(_STEP[b[0]] for b in brackets), default=0)


def loads(data: bytes | str, max_bytes: int, max_depth: int, what: str = "JSON") -> Any:
    """The value of `data`, refusing more than `max_bytes` bytes or a nesting deeper than `max_depth`."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise BadJSON(f"{what} is larger than {max_bytes} bytes")
    if nesting(raw) > max_depth:
        raise BadJSON(f"{what} nests deeper than {max_depth} levels")
    try:
        return json.loads(raw)
    except RecursionError:   # cannot happen after the check above; never let it escape
        raise BadJSON(f"{what} nests too deep") from None
    except ValueError as exc:   # JSONDecodeError, and bytes that are not UTF-8
        raise BadJSON(f"{what} is not valid JSON ({exc})") from None
