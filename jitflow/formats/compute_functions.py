"""How jitflow's host C names the compute part of a host function.

The host C splits a host function in two, as TVM's LLVM host does: the packed entry `__tvm_ffi_f`
(argument checks) calls `jitflow_compute_f`, which takes the buffers' data pointers (as `restrict`
parameters where the TIR function promises that its buffers do not alias) and does the work
(builder/host_c/outline.py). The compute function follows its entry in the C file, so readers of
the host C (the report) take both as one host function, `f`. Names starting `jitflow_` are the
C host's own (the prelude's helpers too): no TIR function may use them.
"""
from __future__ import annotations

import re

PREFIX = "jitflow_compute_"
_CALLED = re.compile(r"\w+\(")


def compute_name(function: str) -> str:
    """The C name of the compute part of the TIR function `function`."""
    return PREFIX + function


def entry_of(c_name: str) -> str | None:
    """The TIR function a compute function belongs to; None for any other C name."""
    return c_name[len(PREFIX):] if c_name.startswith(PREFIX) else None


def calls(text: str) -> list[tuple[str, int]]:
    """Each call of a compute function in C text: (its name, the index of its '('), in order."""
    out, at = [], text.find(PREFIX)
    while at >= 0:
        found = _CALLED.match(text, at)
        if found is not None and (at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_")):
            out.append((found.group()[:-1], found.end() - 1))
        at = text.find(PREFIX, at + len(PREFIX))
    return out
