"""What travels to a build farm's worker, as plain data, and the Executable the worker makes of it.

A request holds the IR as TVM's JSON (tvm.ir.save_json; never a pickled TVM object), the target,
the BuildOptions, the few settings that change the key (the CUDA compiler, the cache salt), the
caller's PassContext as data (opt level, required and disabled passes, config), and the key the
caller computed with every input it covers. The large tensors of a Relax model (its weights) are
taken out of the JSON: they travel apart, once per sweep, and the worker puts them back.

What cannot travel makes an item build where it was asked for (NotPortable says why): a
tvm.transform.Pass given as relax_pipeline=, a PassContext holding instruments (Python objects),
IR that TVM cannot write as JSON, a cache that is off. Everything else the key covers but the
request does not carry (Python registrations, the compiler environment, tool versions, the
recipe) the worker recomputes in its own process: a different key is refused (worker.py).
"""
from __future__ import annotations

import base64
import hashlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any

from .. import config
from ..errors import InvalidInputError
from ..options import BuildOptions, InProcess
from ..targets import TargetSpec
from . import ir_graph

#: the request's layout version
FORMAT = 1
#: tensors in the IR's JSON larger than this (base64 characters) travel apart from it
APART_CHARS = 4096
_TENSOR_NODE = "ffi.Tensor"


class NotPortable(Exception):
    """This executable's inputs cannot be rebuilt elsewhere; the message says which."""


@dataclass
class Request:
    """One build request: `wire` is JSON-able; `weights` are the tensors' bytes that travel apart,
    by sha256 (the positions wire["weights"] names)."""

    wire: dict[str, Any]
    weights: dict[str, bytes] = field(default_factory=dict)


def make(exe: Any, cache_root: str, timeout_s: float | None = None) -> Request:
    """The request that rebuilds `exe` elsewhere (within `timeout_s` there), or NotPortable."""
    if not exe.settings.cache_enabled:
        raise NotPortable("caching is off here, so a library built elsewhere has nowhere to go")
    in_process: InProcess = exe.in_process
    if in_process.relax_pass is not None:
        raise NotPortable("its Relax pipeline is a Pass object (give it a name in tvm.relax.pipeline.PIPELINE_MAP)")
    key = exe.cache_key
    if key.uncacheable:
        raise NotPortable(f"it is not cached ({key.uncacheable}), so what a worker built could not be told apart")
    wire_ir, weights, tensors = _ir_json(exe.mod)
    return Request({
        "format": FORMAT, "key": key.digest, "inputs": key.inputs, "ir": wire_ir,
        "weights": list(weights), "tensors": tensors,
        "target": {"kind": exe.target.kind, "archs": list(exe.target.archs), "config": exe.target.config,
                   "host": exe.target.host},
        "options": exe.options.to_json(),
        "settings": {"cuda_compiler": exe.settings.cuda_compiler, "cache_salt": exe.settings.cache_salt},
        "pass_context": pass_context_data(in_process.pass_context),
        "origin": {"host": socket.gethostname(), "cache": cache_root},
        "timeout_s": timeout_s,
    }, weights)


def pass_context_data(ctx: Any) -> dict[str, Any] | None:
    """The caller's PassContext as data (None: none entered), or NotPortable if it holds objects."""
    if ctx is None:
        return None
    if list(ctx.instruments):
        raise NotPortable("it is compiled inside a PassContext with instruments (Python objects)")
    from ..inputs import pass_context

    return pass_context.key_of(ctx, None)     # opt level, required and disabled passes, config: all data


def _ir_json(mod: Any) -> tuple[str, dict[str, bytes], list[list[Any]]]:
    """TVM's JSON of `mod` with its large tensors taken out: (json, {sha256: bytes}, [[node, position]])."""
    import tvm

    try:
        text = tvm.ir.save_json(mod)
    except Exception as exc:  # noqa: BLE001 - any object TVM cannot serialize
        raise NotPortable(f"TVM cannot write its IR as JSON ({str(exc).splitlines()[0][:200]})") from None
    if f'"{_TENSOR_NODE}"' not in text:
        return text, {}, []              # kernels: no tensor to take out, nothing to parse
    graph = json.loads(text)
    weights: dict[str, bytes] = {}
    tensors = []
    for index, node in enumerate(graph.get("nodes", [])):
        data = node.get("data") if isinstance(node, dict) and node.get("type") == _TENSOR_NODE else None
        if isinstance(data, str) and len(data) > APART_CHARS:
            raw = base64.b64decode(data)
            digest = hashlib.sha256(raw).hexdigest()
            weights.setdefault(digest, raw)
            tensors.append([index, list(weights).index(digest)])
            node["data"] = ""
    return (json.dumps(graph) if tensors else text), weights, tensors


def executable(wire: dict[str, Any], weights: list[bytes]) -> Any:
    """The Executable a request describes, in this process: its settings are this process's own
    (cache folder, shared tier, secrets), except the few that change the key, which travel."""
    import tvm

    from ..executable import Executable

    graph_text = wire["ir"]
    try:   # checked before TVM reads it: a node that refers to itself would crash the worker (ir_graph.py)
        graph = ir_graph.parse(graph_text)
        ir_graph.check(graph)
    except ir_graph.BadGraph as exc:
        raise InvalidInputError(f"refusing a build request whose IR TVM could not read safely: {exc}") from None
    if wire["tensors"]:
        for index, position in wire["tensors"]:
            graph["nodes"][index]["data"] = base64.b64encode(weights[position]).decode()
        graph_text = json.dumps(graph)
    mod = tvm.ir.load_json(graph_text)
    t = wire["target"]
    spec = TargetSpec(kind=t["kind"], archs=tuple(t["archs"]), config=t["config"], host=t["host"])
    s = wire["settings"]
    settings = config.resolve(cuda_compiler=s["cuda_compiler"], cache_salt=s["cache_salt"])._replace(
        build_jobs=1, progress="off", record=None)   # the caller records what comes back (ray_backend.py)
    ctx = wire["pass_context"]
    context = None if ctx is None else tvm.transform.PassContext(
        opt_level=ctx["opt_level"], required_pass=ctx["required"], disabled_pass=ctx["disabled"],
        config=ctx["config"])
    return Executable(mod, spec, settings, BuildOptions.from_json(wire["options"]), InProcess(context, None))
