"""What the C host's vector rewrites share: an expression's dtype and lane count, the error for a
construct that can be split neither into C vectors nor into lanes, and a mutation that raises it."""
from __future__ import annotations

from typing import Any


class CannotSplit(Exception):
    """A construct that can be neither printed as a C vector nor split into lanes."""


#: a PrimType (by handle) -> (the type, its dtype). TVM keeps one PrimType per dtype, and reading a
#: dtype from its type costs more than the rest of a node's visit: the rewrites read one for most nodes
#: they see. The type is kept with it, so its handle is never another's while it is here.
_DTYPES: dict[int, tuple[Any, Any]] = {}
_MAX_DTYPES = 512


def dtype_of(expr: Any):
    """The dtype of a primitive expression, or None for handles, strings and the like."""
    ty = getattr(expr, "ty", None)
    if ty is None or type(ty).__name__ != "PrimType":
        return None
    known = _DTYPES.get(ty.__chandle__())
    if known is None:
        if len(_DTYPES) >= _MAX_DTYPES:
            _DTYPES.clear()
        known = _DTYPES[ty.__chandle__()] = (ty, ty.dtype)
    return known[1]


def lanes_of(expr: Any) -> int:
    """The lane count of an expression (1 for scalars and for what has no dtype)."""
    dtype = dtype_of(expr)
    return dtype.lanes if dtype is not None else 1


def mutate(root: Any, handlers: list[tuple[Any, Any]]) -> Any:
    """tvm_ffi.structural_mutate, with a CannotSplit from a callback raised as itself.

    An exception crossing the FFI boundary comes back as a RuntimeError; the first CannotSplit
    raised by a callback is kept and raised instead.
    """
    import tvm_ffi

    failures: list[CannotSplit] = []

    def guarded(callback: Any) -> Any:
        def run(node: Any, mutator: Any) -> Any:
            try:
                return callback(node, mutator)
            except CannotSplit as exc:
                failures.append(exc)
                raise
        return run

    try:
        return tvm_ffi.structural_mutate(root, [(kind, guarded(cb)) for kind, cb in handlers])
    except Exception:
        if failures:
            raise failures[0] from None
        raise


def short(expr: Any) -> str:
    """An expression's text on one line, at most 120 characters (for error messages)."""
    text = " ".join(str(expr).split())
    return text if len(text) <= 120 else text[:117] + "..."
