"""The cache key, made in this one place: a sha256 over everything that decides a library's bytes.

What the key covers (`cache_key` assembles it; `inputs` is recorded in the entry's meta.json and
checked again on every lookup):

- the module: its canonical IR text (`module_text`: TVMScript, each bound tensor by the sha256 of
  its bytes), by its sha256;
- the target: kind, archs and host (TargetSpec.canonical);
- the build options (options.py): device compiler flags and the CUDA floor, resolved (the
  compiler's default included), the CPU level above the baseline (native as the concrete CPU and
  features it resolved to), and a Relax module's pipeline (`pipeline_key`: a name with the
  callable registered under it, or a Pass by its printed structure);
- the PassContext the build lowers in: the caller's, merged with pass_config= (pass_context.key_of);
- the TVM registrations the build can see (registrations.py): lowering rules that are not TVM's own,
  code-generator callbacks, the TIR pipeline that will run (a callable by what it runs and holds, in
  text that is the same under every Python version: held_values.py, code_identity.py);
- for CUDA, the device compiler and the environment that reaches it: for NVRTC the variables it
  reads, for both TVM's CUDA variables that change the flags (toolchain/environment.py);
- the versions of jitflow, TVM, tvm-ffi, zig and the CUDA compiler (toolchain/versions.py) and a
  digest of jitflow's own build code (recipe.py);
- the entry format version, and the cache salt (cache_salt= / JITFLOW_CACHE_SALT) when one is set.

What differs between two machines installed from one lock file without deciding a library's bytes is
left out, so that keys travel: Python's version (no bytecode), where packages and tools are installed,
the user, the rest of the environment (docs/reliability.md lists both sides).

Making a key changes nothing: not the module, not the options.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ...config import Settings
from ...inputs import pass_context
from ...options import BuildOptions, InProcess, relax_pipeline
from ...targets import TargetSpec
from ...toolchain import environment
from ...toolchain.versions import tool_versions
from . import recipe, registrations
from ..store.entry import FORMAT_VERSION
from .registrations import relax_pipeline_identity

#: how the printer names an object it left out (compiled on first use: kernel modules never need it)
_METADATA = r'metadata\["([^"]+)"\]'
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
    if set(re.findall(_METADATA, text)) - {_CONST_KIND}:
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
    """How a Relax pipeline enters the key: a name with the callable registered under it in
    tvm.relax.pipeline.PIPELINE_MAP (registrations.function_identity), a Pass by its printed structure.

    A Pass prints as the names, opt levels and nesting of its passes, not the Python code or the
    arguments inside them: give a pipeline whose behaviour changes a new name, or a cache salt.
    """
    name = "default" if relax_pipeline is None else relax_pipeline
    if isinstance(name, str):
        identity = relax_pipeline_identity(name)     # Unkeyable when it holds what cannot be named
        return name if identity is None else f"{name} = {identity}"
    return f"pass:{relax_pipeline}"


def ir_sha256(ir_text: str) -> str:
    return hashlib.sha256(ir_text.encode()).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    """A cache key: the hex sha256 and the inputs it was taken over (all but the IR text itself).

    `uncacheable` says why a library made under it must not be cached (a registered pipeline holds
    a value the key cannot name: registrations.Unkeyable), or is None: the pipeline then builds it
    as with caching off."""

    digest: str
    inputs: dict[str, Any]
    uncacheable: str | None = None


def cache_key(mod: Any, spec: TargetSpec, settings: Settings, options: BuildOptions,
              in_process: InProcess) -> CacheKey:
    """The key of building `mod` for `spec` with these settings and options (see the module's
    docstring); for CUDA, `options.cuda_floor` must be resolved already."""
    text = module_text(mod)
    return _hashed(text, spec, _option_inputs(text, spec, settings, options, in_process), versions_of(spec, settings))


def versions_of(spec: TargetSpec, settings: Settings) -> dict[str, str]:
    """The key's `versions` in this process for a target: the tools' and jitflow's own recipe (what a
    rollout check compares an entry's recorded versions with)."""
    return dict(tool_versions(spec, settings.cuda_compiler), recipe=recipe.digest())


def _option_inputs(ir_text: str, spec: TargetSpec, settings: Settings, options: BuildOptions,
                   in_process: InProcess) -> dict[str, Any]:
    """Everything besides the IR, the target and the versions that changes the bytes."""
    inputs: dict[str, Any] = {
        "device_options": list(options.device_options),
        "pass_context": pass_context.key_of(in_process.pass_context, options.pass_config),
        "registrations": registrations.fingerprint(ir_text, spec.kind),
    }
    if spec.is_cuda:
        if options.cuda_floor is None:
            raise ValueError("the CUDA floor must be resolved before the key is taken (Executable.options)")
        inputs["cuda_floor"] = str(options.cuda_floor)
        inputs["cuda_compiler"] = settings.cuda_compiler
        inputs["environment"] = environment.compiler_inputs(settings.cuda_compiler, options.device_options,
                                                            settings.tvm_cuda)
    if options.cpu_level is not None:   # the baseline adds nothing: keys of default builds stay as they were
        inputs["cpu_level"] = options.cpu_level.to_json()
    pipeline = relax_pipeline(options, in_process)
    if pipeline is not None:
        try:
            inputs["relax_pipeline"] = pipeline_key(pipeline)
        except registrations.Unkeyable as exc:
            inputs["relax_pipeline"] = f"{pipeline} = unkeyable"
            inputs["unkeyable"] = str(exc)
    if settings.cache_salt:
        inputs["salt"] = settings.cache_salt
    return inputs


def _uncacheable(options: dict[str, Any]) -> str | None:
    """Why a build under these inputs must not be cached (a registered function holds a value the key
    cannot name), or None; a cache salt takes over naming it (the caller's word for what the key
    cannot see)."""
    reason = options.get("unkeyable") or options["registrations"].get("unkeyable")
    return None if reason is None or "salt" in options else reason


def _hashed(ir_text: str, spec: TargetSpec, options: dict[str, Any], versions: dict[str, str]) -> CacheKey:
    inputs = {
        "format": FORMAT_VERSION,
        "target": json.loads(spec.canonical()),
        "options": options,
        "versions": versions,
        "ir_sha256": ir_sha256(ir_text),
    }
    return CacheKey(digest_of(inputs), inputs, _uncacheable(options))


def digest_of(inputs: Any) -> str:
    """The key of these inputs: what an entry's meta.json records as `key_inputs` hashes to its key."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def module_unchanged(key: CacheKey, mod: Any) -> bool:
    """Whether `mod` still has the IR `key` was taken from (a tensor bound in it can change in place)."""
    return ir_sha256(module_text(mod)) == key.inputs.get("ir_sha256")
