"""The compute functions and parallel bodies of the printed host C (outline.py and parallel.py made
them): not exported, next to their callers, and with `restrict` parameters where their function
promised that its buffers do not alias.

TVM's C printer writes `jitflow_compute_f` and `jitflow_parallel_f_k` as it writes every function:
exported (`TVM_DLL`) and without `restrict`, which its C host never prints. This pass rewrites the
prototype and the definition: the prototype says `visibility("hidden")` (not one of the library's
exports) and `noinline` (compiled once, as TVM's LLVM host compiles its compute functions); in the
functions named as restricted, each pointer parameter but `void*` handles becomes `restrict` (a
parameter that is only read, such as a shape array, gives clang nothing to get wrong); and the
definition moves to just after the function that calls it (a body: the function that calls its
launcher, `jitflow_launch_f_k`), so a reader of the host C sees a host function, its compute part
and its parallel bodies together.
"""
from __future__ import annotations

import re
from typing import AbstractSet

from ...formats.compute_functions import PREFIX
from ...formats.parallel_functions import BODY, LAUNCH
from .c_words import words

_SIGNATURE = re.compile(rf"^TVM_DLL int32_t ((?:{PREFIX}|{BODY})\w+)\((.*)\)(;| \{{)$")
#: what a function calls that places a moved function after it: a compute function, or a launcher
#: (its body follows)
_PLACING_CALL = re.compile(rf"({PREFIX}\w+|{LAUNCH}\w+)\(")    # where it starts a word (c_words.words)
_WRAPPER = ["#ifdef __cplusplus", 'extern "C"', "#endif"]   # TVM prints it before every function
_HIDDEN = '__attribute__((visibility("hidden"), noinline)) '


def _with_restrict(params: str) -> str:
    out = []
    for param in params.split(", "):
        kind, _, name = param.rpartition(" ")
        if kind.endswith("*") and kind.rstrip("* ") != "void":
            param = f"{kind} restrict {name}"
        out.append(param)
    return ", ".join(out)


def _signature(line: str, restricted: AbstractSet[str]) -> tuple[str, str] | None:
    """(name, the line as jitflow writes it) for a compute function's prototype or definition."""
    found = _SIGNATURE.match(line)
    if found is None:
        return None
    name, params, end = found.groups()
    head = f"int32_t {name}({_with_restrict(params) if name in restricted else params})"
    return name, (_HIDDEN + head + ";" if end == ";" else head + " {")


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last + 1) of each function definition: its line at column 0 ending in ') {' to the '}'
    line that closes it (TVM indents bodies), the wrapper before it and a blank line after."""
    out, start = [], None
    for i, line in enumerate(lines):
        if start is None and line.endswith(") {") and line[:1] not in ("", " ", "#", "/"):
            start = i - len(_WRAPPER) if lines[max(i - len(_WRAPPER), 0):i] == _WRAPPER else i
        elif start is not None and line == "}":
            end = i + 2 if i + 1 < len(lines) and not lines[i + 1] else i + 1
            out.append((start, end))
            start = None
    return out


def _placements(lines: list[str], blocks: list[tuple[int, int]], inner: dict[str, tuple[int, int]]
                ) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Function block -> the moved functions' blocks to write after it (those it calls first; for a
    launcher, its body)."""
    placed: set[tuple[int, int]] = set()
    after: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for block in blocks:
        header = next((i for i in range(block[0], block[1]) if lines[i].endswith(") {")), block[0])
        text = "\n".join(lines[header + 1:block[1]])
        for name in dict.fromkeys(m.group(1) for m in words(_PLACING_CALL, text)):
            moved = inner.get(BODY + name[len(LAUNCH):] if name.startswith(LAUNCH) else name)
            if moved is not None and moved not in placed and moved != block:
                placed.add(moved)
                after.setdefault(block, []).append(moved)
    return after


def place_compute(text: str, restricted: AbstractSet[str] = frozenset()) -> str:
    """The printed host C with its compute functions' and parallel bodies' signatures rewritten
    (hidden, not inlined; `restrict` pointers in those named in `restricted`) and each definition
    moved to just after the function that calls it; text without them is returned unchanged."""
    if PREFIX not in text and BODY not in text:
        return text
    lines = text.split("\n")
    defined: dict[str, int] = {}
    for i, line in enumerate(lines):
        found = _signature(line, restricted) if line.startswith(("TVM_DLL int32_t " + PREFIX,
                                                                 "TVM_DLL int32_t " + BODY)) else None
        if found is not None:
            if line.endswith("{"):
                defined[found[0]] = i
            lines[i] = found[1]
    blocks = _blocks(lines)
    inner = {name: next(b for b in blocks if b[0] <= at < b[1]) for name, at in defined.items()}
    after = _placements(lines, blocks, inner)
    placed = {b for followers in after.values() for b in followers}
    out: list[str] = []

    def write(block: tuple[int, int]) -> None:
        out.extend(lines[block[0]:block[1]])
        for follower in after.get(block, ()):
            write(follower)

    position = 0
    for block in blocks:
        out += lines[position:block[0]]
        position = block[1]
        if block not in placed:                  # a placed block is written after its caller instead
            write(block)
    out += lines[position:]
    return "\n".join(out)
