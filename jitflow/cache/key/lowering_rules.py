"""The intrinsic lowering rules of this process that are not TVM's own: part of the cache key.

TVM's LowerIntrin pass looks a rule up for every intrinsic call under the target's op attributes
(`c.FLowerIntrinsic`, `default.FLegalize`, ...), and a process can register its own for any op
(`tvm.tirx.register_intrin_lowering`, `tvm.ir.register_op_attr`). Such a rule reaches intrinsics
the module never names: sigmoid is legalized into exp, and a Relax model's intrinsics appear only
while TVM legalizes it. So the rules of every op are looked at, not those of the ops the module's
text names; for a CPU build, the device intrinsics' (`tirx.ptx.*`, `tirx.cuda.*`, ...) only where
they can be reached (see foreign_rules).

A rule compiled into TVM's own libraries is covered by TVM's version. Any other one (written in
Python, TVM's few Python rules among them, or from another library) is keyed by what it makes of
a probe call per dtype. Whose code a rule is comes from its function cell: tvm-ffi's C ABI sets
`cpp_call` for functions made in C++ and leaves it NULL for all others, and `dladdr` names the
library that code lies in.

Every key looks the rules of every op up again, so a rule registered or replaced at any time is
seen: before jitflow was imported, between two keys, by Python or by another library's C++. What
is kept is what cannot change unseen:

- the op names, by TVM's structural hash of its list of ops: per process (the list is read again
  when the number of ops changes: ops are never removed) and per TVM install (toolchain/install_memo.py: a
  fresh process whose TVM lists the ops the memo was taken from takes the names from it instead of
  converting the whole list, about half a millisecond);
- each rule's verdict and probes, per process, by the op and the rule (both held so that their
  addresses are never reused).

In a fresh process that is about 0.5 ms for a CPU build, and a tenth of a millisecond for every
later key.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
from functools import lru_cache
from itertools import repeat
from typing import Any

from ...toolchain import install_memo

#: op attributes TVM's LowerIntrin pass consults, per target kind (the host is always "c")
PATTERNS = {
    "c": ("c.FLowerIntrinsic", "c.FLegalize", "default.FLowerIntrinsic", "default.FLegalize"),
    "cuda": ("cuda.FLowerIntrinsic", "cuda.FLegalize", "cuda.fastmath.FLowerIntrinsic",
             "default.FLowerIntrinsic", "default.FLegalize"),
}
#: the dtypes of the probe calls (integer ones too: clz, popcount and shifts have rules)
DTYPES = ("bfloat16", "float16", "float32", "float64", "int32", "int64")
_CELL_CPP_CALL = 24 + 8   # sizeof(TVMFFIObject), then TVMFFIFunctionCell {safe_call, cpp_call}
#: the device namespaces of TVM's ops, and how a module's text names one (T.ptx.mma, T.cuda.__shfl_sync)
DEVICE_NAMESPACES = tuple(f"tirx.{ns}." for ns in ("ptx", "ptx_legacy", "cuda", "nvshmem", "nki", "metal", "webgpu"))
NAMES_DEVICE_OP = re.compile(r"\b(ptx|ptx_legacy|cuda|nvshmem|nki|metal|webgpu)[._]")
_known: dict[tuple[int, int], tuple[Any, Any, dict[str, str] | None]] = {}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


@lru_cache(maxsize=1)
def _dladdr() -> Any:
    """libc's dladdr, or None where there is none (then every rule counts as foreign)."""
    try:
        fn = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]   # the info by its address: no pointer type to make
    fn.restype = ctypes.c_int
    return fn


@lru_cache(maxsize=1)
def _tvm_libraries() -> frozenset[str]:
    """The files of the libraries TVM loaded (its compiler and runtime), as they were loaded."""
    import tvm

    return frozenset(lib._name for lib in getattr(tvm.base, "_LOADED_LIBS", {}).values() if getattr(lib, "_name", None))


@lru_cache(maxsize=1)
def _tvm_libraries_resolved() -> frozenset[str]:
    return frozenset(os.path.realpath(name) for name in _tvm_libraries())


@lru_cache(maxsize=None)
def _ffi(name: str) -> Any:
    import tvm_ffi

    return tvm_ffi.get_global_func(name)


def is_tvms_own(rule: Any) -> bool:
    """Whether `rule` is a function compiled into one of the libraries TVM loaded."""
    import tvm_ffi

    if not isinstance(rule, tvm_ffi.Function):
        return False
    cpp_call = ctypes.c_void_p.from_address(rule.__chandle__() + _CELL_CPP_CALL).value
    return bool(cpp_call) and _in_tvm(cpp_call)   # NULL: made through the C API (a Python function)


@lru_cache(maxsize=None)
def _in_tvm(address: int) -> bool:
    """Whether code at `address` lies in one of TVM's libraries (a handful of addresses per process)."""
    dladdr = _dladdr()
    info = _DlInfo()
    if dladdr is None or not dladdr(address, ctypes.addressof(info)) or not info.dli_fname:
        return False
    name = info.dli_fname.decode(errors="replace")
    return name in _tvm_libraries() or os.path.realpath(name) in _tvm_libraries_resolved()


def _probes(op: Any, rule: Any) -> dict[str, str]:
    """dtype -> what `rule` makes of a call of `op` with arguments of that dtype."""
    import tvm

    out = {}
    for dtype in DTYPES:
        args = [tvm.tirx.Var(f"x{i}", dtype) for i in range(max(int(op.num_inputs), 1))]
        try:
            out[dtype] = str(rule(tvm.tirx.op.call_intrin(dtype, op.name, *args)))
        except Exception as exc:  # a rule that refuses the probe: still a stable fact about it
            out[dtype] = f"error {type(exc).__name__}"
    return out


def _foreign_probes(op: Any, rule: Any) -> dict[str, str] | None:
    """The probes of a rule that is not TVM's own (None for TVM's own), memoized."""
    import tvm_ffi

    if not isinstance(rule, tvm_ffi.Function):
        return _probes(op, rule)
    memo = (op.__chandle__(), rule.__chandle__())
    known = _known.get(memo)
    if known is None:
        known = (op, rule, None if is_tvms_own(rule) else _probes(op, rule))
        _known[memo] = known
    return known[2]


class _Ops:
    """TVM's ops but Relax's, split into those of the device namespaces and the rest, each listed
    (as op objects) when first asked for, and again when the number of ops changed."""

    def __init__(self) -> None:
        self.count = -1
        self.listed: Any = None        # TVM's list of op names, as TVM returned it
        self.digest = ""               # its structural hash
        self.ops: dict[bool, list[Any] | None] = {False: None, True: None}

    def of(self, device: bool) -> list[Any]:
        names = _ffi("ir.ListOpNames")()
        if len(names) != self.count:
            import tvm_ffi

            self.count, self.listed, self.digest = len(names), names, str(tvm_ffi.structural_hash(names))
            self.ops = {False: None, True: None}
        found = self.ops[device]
        if found is None:
            get = _ffi("ir.GetOp")
            found = self.ops[device] = [get(name) for name in self._names(device)]
        return found

    def _names(self, device: bool) -> list[str]:
        """The names of one part: the install memo's where it was taken from a list of ops with this
        structural hash, else read from TVM (in one call, not one per name) and memoized."""
        memo = install_memo.read(_memo_name(device))
        if isinstance(memo, dict) and memo.get("hash") == self.digest and memo.get("count") == self.count:
            names = memo.get("names")
            if isinstance(names, list) and all(type(n) is str for n in names):
                return names
        split: dict[bool, list[str]] = {False: [], True: []}
        for name in json.loads(_ffi("ffi.json.Stringify")(self.listed, None)):
            if not name.startswith("relax."):
                split[name.startswith(DEVICE_NAMESPACES)].append(name)
        for part, names in split.items():
            install_memo.write(_memo_name(part), {"hash": self.digest, "count": self.count, "names": names})
        return split[device]


_OPS = _Ops()


@lru_cache(maxsize=None)
def _memo_name(device: bool) -> str:
    """The install memo of one part of TVM's op names, one per TVM install (by its package's path)."""
    import tvm

    return f"tvm-ops-{hashlib.sha256(tvm.__file__.encode()).hexdigest()[:16]}-{'device' if device else 'host'}"


def _scan(ops: list[Any], patterns: list[str], out: dict[str, str]) -> None:
    if not ops:
        return
    has_map, get = _ffi("ir.OpHasAttr"), _ffi("ir.OpGetAttr")
    for pattern in patterns:
        if not has_map(ops[0], pattern):   # no op has a rule under this attribute
            continue
        for op, rule in zip(ops, map(get, ops, repeat(pattern))):
            if rule is None:
                continue
            probes = _foreign_probes(op, rule)
            if probes is not None:
                out.update((f"{op.name} {pattern} {dtype}", text) for dtype, text in probes.items())


def foreign_rules(kinds: tuple[str, ...], ir_text: str = "") -> dict[str, str]:
    """'op pattern dtype' -> the lowered probe, for every rule of these target kinds' patterns
    whose code is not TVM's own (empty in a process that registered none).

    The rules of device intrinsics (tirx.ptx.*, tirx.cuda.*, ...) count for CUDA builds, where the
    module's text (`ir_text`) names one, and once a rule that is not TVM's own was found at all
    (it may bring them in). C host code otherwise never holds them: TVM's own lowering for a CPU
    does not write them.
    """
    patterns = list(dict.fromkeys(p for kind in kinds for p in PATTERNS.get(kind, ())))
    out: dict[str, str] = {}
    _scan(_OPS.of(device=False), patterns, out)
    if out or "cuda" in kinds or NAMES_DEVICE_OP.search(ir_text):
        _scan(_OPS.of(device=True), patterns, out)
    return out
