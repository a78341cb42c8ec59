"""Read what a Relax shape function computes, from the host C that TVM generated for it.

Shapes that depend on symbols (a buffer of `n * 32` bytes) are computed at run time by a TIR
function that takes the VM's shape heap (an int64 tensor) and writes slots from other slots:

    int64_t* H = ((int64_t*)((int64_t*)(((DLTensor*)H_handle)[0].data)));
    H[1] = (H[0] * (int64_t)32);

heap_writes() returns {1: "(heap_0 * 32)"}, in terms of heap_<j> for slot j, with the function's
local definitions substituted, so that the bytecode walk can name the slots by their symbols.
"""
from __future__ import annotations

import re

from ..formats import c_expr
from .types import HostFunction

_DATA_POINTER = re.compile(r"^\s*int64_t\*\s*(\w+)\s*=\s*.*\b(\w+)_handle\)\[0\]\.data\)+;\s*$")
_WRITE = re.compile(r"^\s*(\w+)\[(\d+)\]\s*=\s*(.+?);\s*$")
_DECL = re.compile(r"^\s*(?:const\s+)?(?:[A-Za-z_]\w*\s*\**\s+)\**(\w+)\s*=(?!=)\s*(.+?);\s*$")


def heap_writes(host_c: str, function: HostFunction) -> dict[int, str] | None:
    """Slot -> C expression (over heap_<j>) for each heap slot the shape function writes; None when
    the function does not look like a shape function (no int64 data pointer written by index)."""
    lines = host_c.splitlines()[function.line:function.end_line - 1]
    pointers: set[str] = set()
    definitions: dict[str, str] = {}
    writes: dict[int, str] = {}
    for line in lines:
        m = _DATA_POINTER.match(line)
        if m:
            pointers.add(m.group(1))
            continue
        m = _WRITE.match(line)
        if m and m.group(1) in pointers:
            writes[int(m.group(2))] = _slots(m.group(3), pointers)
            continue
        m = _DECL.match(line)
        if m and not line.lstrip().startswith(("if", "return")):
            definitions[m.group(1)] = _slots(m.group(2), pointers)
    if not writes:
        return None
    return {slot: c_expr.parse(text, definitions).text for slot, text in writes.items()}


def _slots(text: str, pointers: set[str]) -> str:
    """Replace reads of the heap (`H[0]`, `((int64_t*)H)[0]`) by heap_<j>."""
    for name in pointers:
        text = re.sub(rf"\(\(int64_t\*\)\s*{name}\)\[(\d+)\]", r"heap_\1", text)
        text = re.sub(rf"\b{name}\[(\d+)\]", r"heap_\1", text)
    return text
