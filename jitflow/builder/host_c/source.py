"""TVM's host C made compilable on its own by zig's clang, and clang's complaints about it made readable.

The only text change is inserting the typed prelude (prelude.py) after TVM's `#include <math.h>`;
everything else TVM's printer gets wrong is fixed in the IR before printing (legalize.py).
"""
from __future__ import annotations

import re

from ...errors import CompileError, HostCodeError
from .noalias_c import restrict_compute
from .outline import SUFFIX as _COMPUTE_SUFFIX
from .prelude import END_MARK, MARK, prelude_for

_ANCHOR = "#include <math.h>\n"
_FUNCTION_RE = re.compile(r"^TVM_DLL [\w\s\*]*?\b(\w+)\(.*\{\s*$")
_CLANG_ERROR_RE = re.compile(r"^(?:[^:\s]*/)?host\.c:(\d+):\d+: error: (.*)$", re.MULTILINE)
_ENTRY_PREFIX = "__tvm_ffi_"


def host_source(text: str) -> str:
    """TVM's host C with the jitflow prelude in front of its code (after its includes)."""
    if not text.strip() or MARK in text:
        return text
    head, sep, rest = text.partition(_ANCHOR)
    if not sep:
        head, rest = "", text
    return head + sep + prelude_for(text) + restrict_compute(rest)


def tir_name(symbol: str) -> str:
    """The TIR function's name for a C symbol (TVM names the packed entry of f `__tvm_ffi_f`, and
    the body outlined from it `f_compute_`)."""
    if symbol.startswith(_ENTRY_PREFIX):
        return symbol[len(_ENTRY_PREFIX):]
    return symbol[:-len(_COMPUTE_SUFFIX)] if symbol.endswith(_COMPUTE_SUFFIX) else symbol


def _function_at(lines: list[str], number: int) -> str | None:
    """The C function whose body holds line `number` (1-based), by its definition line above it."""
    for line in reversed(lines[:number]):
        found = _FUNCTION_RE.match(line)
        if found:
            return tir_name(found.group(1))
    return None


def explain(error: CompileError, text: str) -> CompileError:
    """A HostCodeError naming what clang rejected in the host C and the TIR function it is in.

    error is zig's CompileError for compiling `text` (the host C as written to disk); an error
    that is not about a line of that file is returned unchanged.
    """
    found = _CLANG_ERROR_RE.findall(error.log)
    if not found:
        return error
    lines = text.splitlines()
    end = next((n for n, line in enumerate(lines, 1) if line.startswith(END_MARK)), 0)
    errors = [(int(number), message.strip()) for number, message in found]
    if errors[0][0] <= end:
        construct = f"jitflow's C prelude ({errors[0][1]}); this is a jitflow bug, please report it"
        return HostCodeError(construct, [], tool=error.tool, command=error.command, log=error.log,
                             source_path=error.source_path)
    located = [(n, m, _function_at(lines, n)) for n, m in errors]
    number, message, _ = next((e for e in located if e[2] is not None), located[0])
    code = lines[number - 1].strip() if number <= len(lines) else ""
    construct = f"C that clang rejects ({message}) at `{code[:160]}`"
    functions = sorted({f for _, _, f in located if f is not None})
    return HostCodeError(construct, functions, tool=error.tool, command=error.command, log=error.log,
                         source_path=error.source_path)
