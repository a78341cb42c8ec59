"""TVM's host C made compilable on its own by zig's clang: the definitions TVM's C printer leaves out."""
from __future__ import annotations

import re

_HALF_RE = re.compile(r"\bhalf\b")
_HALF_PRELUDE = "typedef _Float16 half;  /* jitflow: TVM's C code names float16 'half' without defining it */\n"


def host_source(text: str) -> str:
    """TVM's host C, made compilable on its own: it uses `half` for float16 but never defines it."""
    if _HALF_RE.search(text) and "typedef _Float16 half" not in text:
        head, sep, rest = text.partition("#include <math.h>\n")
        return head + sep + _HALF_PRELUDE + rest if sep else _HALF_PRELUDE + text
    return text
