"""The cache key: sha256 over everything that decides a library's bytes."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from .target import TargetSpec

#: Bump when the layout of entries or of the built library changes.
FORMAT_VERSION = 1


def module_text(mod: Any) -> str:
    """Canonical text of the IR: TVMScript with metadata (constants) printed."""
    return mod.script(show_meta=True)


def tool_versions(spec: TargetSpec, cuda_compiler: str) -> dict[str, str]:
    """Versions of jitflow, TVM, zig and (for CUDA) the device compiler."""
    import tvm

    from . import __version__, zig_cc

    versions = {"jitflow": __version__, "tvm": tvm.__version__, "zig": zig_cc.version()}
    if spec.is_cuda:
        if cuda_compiler == "nvcc":
            from . import cuda_nvcc

            versions["cuda_compiler"] = cuda_nvcc.version()
        else:
            from . import cuda_nvrtc

            versions["cuda_compiler"] = cuda_nvrtc.version()
    return versions


def compute(ir_text: str, spec: TargetSpec, options: dict[str, Any],
            versions: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(hex sha256 key, the inputs that went into it except the IR text)."""
    inputs = {
        "format": FORMAT_VERSION,
        "target": json.loads(spec.canonical()),
        "options": options,
        "versions": versions,
        "ir_sha256": hashlib.sha256(ir_text.encode()).hexdigest(),
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    return digest, inputs
