"""TVM's host C made compilable on its own by zig's clang, and clang's complaints about it made readable.

The text changes are inserting the typed prelude (prelude.py, ended by the C of the parallel
launches: parallel_c.py) after TVM's `#include <math.h>`, the compute functions' and parallel
bodies' signatures and places (outline_c.py), and taking out the `#pragma unroll 1` TVM's printer
writes before every `while` loop (below); everything else TVM's printer gets wrong is fixed in the
IR before printing (legalize.py).
"""
from __future__ import annotations

import re
from typing import AbstractSet

from ...errors import CompileError, HostCodeError
from ...formats.compute_functions import PREFIX as _COMPUTE_PREFIX, entry_of
from .outline_c import place_compute
from .parallel_c import launches_for
from .prelude import END_MARK, MARK, prelude_for

_ANCHOR = "#include <math.h>\n"
_FUNCTION_RE = re.compile(r"^TVM_DLL [\w\s\*]*?\b(\w+)\(.*\{\s*$")
_COMPUTE_RE = re.compile(rf"^int32_t ({_COMPUTE_PREFIX}\w+)\(.*\{{\s*$")     # as outline_c.py writes it
_CLANG_ERROR_RE = re.compile(r"^(?:[^:\s]*/)?host\.c:(\d+):\d+: error: (.*)$", re.MULTILINE)
_ENTRY_PREFIX = "__tvm_ffi_"
#: TVM's C printer writes every `while` loop after `#pragma unroll 1` (a hint meant for CUDA), so clang
#: never unrolls one; TVM's LLVM host gives LLVM no such hint, and its -O3 unrolls a counted while
#: loop as any other (a 64-step one inside a parallel body, whole: 1.5x-1.7x of LLVM's time with the
#: pragma). Without it, clang decides as it does for a `for` loop.
_WHILE_NO_UNROLL = re.compile(r"^( *)#pragma unroll 1\n(\1while \(1\) \{)$", re.MULTILINE)


def host_source(text: str, restrict: AbstractSet[str] = frozenset()) -> str:
    """TVM's host C with the jitflow prelude in front of its code (after its includes), its compute
    functions and parallel bodies placed (`restrict`: those whose buffers do not alias, codegen.Printed)
    and its `while` loops left to clang's unrolling."""
    if not text.strip() or MARK in text:
        return text
    head, sep, rest = text.partition(_ANCHOR)
    if not sep:
        head, rest = "", text
    prelude, launches = prelude_for(text), launches_for(text)
    if launches:        # the parallel launches' C ends the prelude: a clang error in it reads as jitflow's
        prelude = prelude.replace(END_MARK, launches + END_MARK)
    rest = _WHILE_NO_UNROLL.sub(r"\2", rest)
    return head + sep + prelude + place_compute(rest, restrict)


def tir_name(symbol: str) -> str:
    """The TIR function's name for a C symbol (TVM names the packed entry of f `__tvm_ffi_f`)."""
    return symbol[len(_ENTRY_PREFIX):] if symbol.startswith(_ENTRY_PREFIX) else symbol


def _function_at(lines: list[str], number: int) -> str | None:
    """The C function whose body holds line `number` (1-based), by its definition line above it."""
    for line in reversed(lines[:number]):
        found = _FUNCTION_RE.match(line) or _COMPUTE_RE.match(line)
        if found:
            return entry_of(found.group(1)) or tir_name(found.group(1))
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
