"""Whether this environment computes the key inputs an entry was made under (`jitflow cache check`).

An entry records the inputs of its key (meta.json's key_inputs, key.py). Some are the call's own (the
IR, pass_config, device options, the CUDA floor, the CPU level) and travel with the workload: they
are not compared. The others come from the environment, and a server whose environment differs
from the builder's computes other keys for the same calls and misses every entry:

- the format version of entries;
- the versions of jitflow, TVM and the tools for the entry's target, and jitflow's own recipe
  (key.versions_of);
- the TIR pipeline TVM runs, and the Relax pipeline behind the name an entry was built with
  (registrations.py);
- the settings that enter every key: the cache salt (JITFLOW_CACHE_SALT), and for CUDA the device
  compiler (JITFLOW_CUDA_COMPILER) and the environment that reaches it (TVM's CUDA variables, NVRTC's).

Each difference is named as key_diff names one: `versions.zig: here 0.17.1, in the bundle 0.16.0`.
In a TVM without its compiler no key is computed (entries load by label, jitflow.load_entry), so
nothing is compared there.
"""
from __future__ import annotations

import os
from typing import Any

from ...config import Settings
from ...errors import JitflowError
from ..key import key_diff
from ..store.entry import FORMAT_VERSION

#: what a value that cannot be computed here reads as (always a difference)
_UNKNOWN = "(cannot be computed here: {})"


def compiler_missing() -> str | None:
    """Why this process's TVM cannot compute keys (installed without its compiler), or None when it can."""
    if os.environ.get("TVM_USE_RUNTIME_LIB") == "1":
        return "TVM_USE_RUNTIME_LIB=1: this TVM runs without its compiler"
    from ...runtime import tvm_runtime

    try:
        folder = tvm_runtime.lib_folder()
    except JitflowError as exc:
        return str(exc)
    return None if (folder / "libtvm_compiler.so").is_file() else f"this TVM has no compiler ({folder} holds no " \
                                                                  "libtvm_compiler.so)"


class Environment:
    """This process's side of the environment's key inputs, each computed once and kept."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._known: dict[Any, Any] = {}

    def _once(self, name: Any, compute: Any) -> Any:
        if name not in self._known:
            try:
                self._known[name] = compute()
            except (JitflowError, ImportError, OSError, ValueError) as exc:
                self._known[name] = _UNKNOWN.format(str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__)
        return self._known[name]

    def versions(self, recorded_target: dict[str, Any]) -> Any:
        from ...targets import TargetSpec
        from ..key.key import versions_of

        config = recorded_target.get("config") if isinstance(recorded_target.get("config"), dict) else {}
        kind = config.get("kind", "c")
        spec = TargetSpec(kind if isinstance(kind, str) else "c")
        return self._once(("versions", spec.is_cuda),
                          lambda: versions_of(spec, self.settings))

    def tir_pipeline(self) -> Any:
        from ..key.registrations import tir_pipeline_identity

        return self._once("tir", tir_pipeline_identity)

    def relax_pipeline(self, recorded: str) -> Any:
        """The Relax pipeline behind the name `recorded` starts with ('default = ...'), as key.py keys it."""
        from ..key.key import pipeline_key

        name = recorded.split(" = ", 1)[0]
        return self._once(("relax", name), lambda: pipeline_key(name))

    def environment(self, device_options: list[str]) -> Any:
        from ...toolchain import environment

        s = self.settings
        return self._once(("environment", tuple(device_options)),
                          lambda: environment.compiler_inputs(s.cuda_compiler, device_options, s.tvm_cuda))


def compared(env: Environment, recorded: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(this environment's, the entry's) values of the key inputs compared, in the shape of key_inputs."""
    options = recorded.get("options") if isinstance(recorded.get("options"), dict) else {}
    target = recorded.get("target") if isinstance(recorded.get("target"), dict) else {}
    registrations = options.get("registrations") if isinstance(options.get("registrations"), dict) else {}
    here_options: dict[str, Any] = {"registrations": {"tir_pipeline": env.tir_pipeline()}}
    there_options: dict[str, Any] = {"registrations": {"tir_pipeline": registrations.get("tir_pipeline")}}
    pipeline = options.get("relax_pipeline")
    if isinstance(pipeline, str) and not pipeline.startswith("pass:"):   # a Pass object is the call's own
        here_options["relax_pipeline"], there_options["relax_pipeline"] = env.relax_pipeline(pipeline), pipeline
    here_options["salt"], there_options["salt"] = env.settings.cache_salt or None, options.get("salt")
    if "cuda_compiler" in options:
        here_options["cuda_compiler"], there_options["cuda_compiler"] = env.settings.cuda_compiler, \
            options["cuda_compiler"]
        devices = options.get("device_options") if isinstance(options.get("device_options"), list) else []
        here_options["environment"] = env.environment([str(d) for d in devices])
        there_options["environment"] = options.get("environment")
    here = {"format": FORMAT_VERSION, "versions": env.versions(target), "options": here_options}
    there = {"format": recorded.get("format"), "versions": recorded.get("versions"), "options": there_options}
    return here, there


def differences(env: Environment, recorded: Any, where: str) -> list[str]:
    """Each key input this environment computes otherwise than the entry recorded, in a line
    ('versions.zig: here 0.17.1, in the bundle 0.16.0'); `where` names the entry's side."""
    if not isinstance(recorded, dict):
        return ["key_inputs: the entry records none (built by an older jitflow): pack it again"]
    here, there = compared(env, recorded)
    return key_diff.lines(here, there, where, limit=8)
