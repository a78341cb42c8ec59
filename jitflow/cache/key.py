"""The cache key: sha256 over everything that decides a library's bytes."""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..target import TargetSpec
from .entry import FORMAT_VERSION
from .registrations import relax_pipeline_identity

_METADATA_RE = re.compile(r'metadata\["([^"]+)"\]')
_CONST_KIND = "ir.GenericConst"


def module_text(mod: Any) -> str:
    """Canonical text of the IR: TVMScript, with each bound tensor (a weight) given by its sha256.

    Kernel modules print with their metadata. A module with Relax functions prints without it
    (printing large constants is slow, and crashes TVM 0.27), followed by one line per tensor
    constant in a fixed visiting order: dtype, shape and the sha256 of its bytes.
    """
    import tvm

    if not any(isinstance(f, tvm.relax.Function) for f in mod.functions.values()):
        return mod.script(show_meta=True)
    text = mod.script(show_meta=False)
    lines = [text] + [f"# constant {c}" for c in constant_digests(mod)]
    if set(_METADATA_RE.findall(text)) - {_CONST_KIND}:
        # objects the printer left out that are not tensor constants: let TVM's structural hash cover them
        import tvm_ffi

        lines.append(f"# structural hash {tvm_ffi.structural_hash(mod)}")
    return "\n".join(lines)


def constant_digests(mod: Any) -> list[str]:
    """'dtype shape sha256' of every constant in the module's Relax functions, in visiting order."""
    import tvm

    found: list[Any] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, tvm.ir.expr.GenericConst):
            found.append(expr.value)

    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if isinstance(func, tvm.relax.Function):
            tvm.relax.analysis.post_order_visit(func, visit)
    digests: dict[int, str] = {}
    out = []
    for value in found:
        if not isinstance(value, tvm.runtime.Tensor):
            out.append(f"{type(value).__name__} {value!r}")
            continue
        handle = value.__chandle__()  # the same tensor used twice is read once
        if handle not in digests:
            digests[handle] = f"{value.dtype} {list(value.shape)} {tensor_sha256(value)}"
        out.append(digests[handle])
    return out


def tensor_sha256(tensor: Any) -> str:
    """sha256 of a tensor's bytes, read in place where DLPack allows (no printing, no copy)."""
    import numpy as np

    try:
        array = np.from_dlpack(tensor)
    except (TypeError, RuntimeError, BufferError, ValueError):
        array = tensor.numpy()  # dtypes numpy's DLPack import does not know (bfloat16, ...)
    return hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).hexdigest()


def pipeline_key(relax_pipeline: Any) -> str:
    """How a Relax pipeline enters the key: a name with the function registered under it in
    tvm.relax.pipeline.PIPELINE_MAP (module, name, bytecode), a Pass by its printed structure.

    A Pass prints as the names, opt levels and nesting of its passes, not the Python code or the
    arguments inside them: give a pipeline whose behaviour changes a new name, or a cache salt.
    """
    name = "default" if relax_pipeline is None else relax_pipeline
    if isinstance(name, str):
        identity = relax_pipeline_identity(name)
        return name if identity is None else f"{name} = {identity}"
    return f"pass:{relax_pipeline}"


def ir_sha256(ir_text: str) -> str:
    return hashlib.sha256(ir_text.encode()).hexdigest()


def compute_key(ir_text: str, spec: TargetSpec, options: dict[str, Any],
                versions: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(hex sha256 key, the inputs that went into it except the IR text).

    `options` holds everything besides the IR and target that changes the bytes (pass context,
    device options, registrations, the compilers' environment, the salt); `versions` the tools'
    versions and jitflow's recipe digest.
    """
    inputs = {
        "format": FORMAT_VERSION,
        "target": json.loads(spec.canonical()),
        "options": options,
        "versions": versions,
        "ir_sha256": ir_sha256(ir_text),
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    return digest, inputs
