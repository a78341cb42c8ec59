"""What a build is asked for beyond the module, the target and the settings: jitflow.compile's build
arguments as one frozen value.

Two parts, kept apart on purpose:

- BuildOptions: plain data (the PassContext options of pass_config=, device compiler flags, the
  CUDA floor, a Relax pipeline's name, the CPU level). It can be written as JSON and read back (to_json /
  from_json), so that another process or machine can build the same library.
- InProcess: live objects of the caller's process that cannot travel: the PassContext the caller
  had entered when compiling (inputs/pass_context.py), and a tvm.transform.Pass given as relax_pipeline=.
  A build elsewhere can only use what BuildOptions holds.

Both are made once, by jitflow.compile, and never changed: lower stages read them, none returns
or edits them. The pipeline arguments are read here too (relax_pipeline_of, check_tir_pipeline).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from .errors import InvalidInputError
from .targets.cpu_level import CpuLevel
from .targets.cuda_floor import CudaVersion, parse

#: BuildOptions.relax_pipeline of a Relax module built with TVM's default pipeline for its target
DEFAULT_PIPELINE = "default"


@dataclass(frozen=True)
class BuildOptions:
    """The plain-data options of one build (frozen; JSON through to_json / from_json)."""

    #: pass_config= as sorted (name, value) pairs; values are TVM config values (numbers, strings,
    #: lists and dicts of them). Read it as a dict through `pass_config`.
    pass_config_items: tuple[tuple[str, Any], ...] = ()
    #: extra NVRTC/nvcc flags (device_options=)
    device_options: tuple[str, ...] = ()
    #: the oldest driver the library must load on; None for a CPU target, and until the Executable
    #: resolves the compiler's default (Executable.options always has it resolved)
    cuda_floor: CudaVersion | None = None
    #: a Relax module's pipeline by name (DEFAULT_PIPELINE: TVM's for the target); None for a module
    #: without Relax functions, or when the pipeline is a Pass object (InProcess.relax_pass)
    relax_pipeline: str | None = None
    #: how much of the CPU the host code may use (targets/cpu_level.py), resolved: native is already
    #: a concrete CPU and feature list here; None for the architecture's baseline
    cpu_level: CpuLevel | None = None
    #: a label for the cache entry (compile(name=...), the command line's FILE.py:NAME); not keyed
    label: str | None = None
    #: where the caller compiled the module ('FILE:LINE', inputs/origin.py), kept with the entry; not
    #: keyed, and not compared: options compiled at two places build the same library
    origin: str | None = field(default=None, compare=False)

    @classmethod
    def make(cls, pass_config: Mapping[str, Any] | None = None, device_options: Sequence[str] = (),
             cuda_floor: CudaVersion | str | None = None, relax_pipeline: str | None = None,
             cpu_level: CpuLevel | None = None, label: str | None = None, origin: str | None = None) -> BuildOptions:
        """Options from already checked arguments (jitflow.compile checks them)."""
        return cls(pass_config_items=tuple(sorted(dict(pass_config or {}).items())),
                   device_options=tuple(device_options),
                   cuda_floor=None if cuda_floor is None else parse(cuda_floor),
                   relax_pipeline=relax_pipeline, cpu_level=cpu_level, label=label, origin=origin)

    @property
    def pass_config(self) -> dict[str, Any]:
        """pass_config= as a new dict."""
        return dict(self.pass_config_items)

    def with_cuda_floor(self, floor: CudaVersion) -> BuildOptions:
        """The same options for the CUDA floor `floor` (a new value: options are never changed)."""
        return replace(self, cuda_floor=floor)

    def to_json(self) -> dict[str, Any]:
        """The options as JSON-able data (from_json reads it back into an equal value)."""
        data = {"pass_config": self.pass_config, "device_options": list(self.device_options),
                "cuda_floor": None if self.cuda_floor is None else str(self.cuda_floor),
                "relax_pipeline": self.relax_pipeline,
                "cpu_level": None if self.cpu_level is None else self.cpu_level.to_json()}
        unkeyed = {name: value for name, value in (("label", self.label), ("origin", self.origin)) if value is not None}
        return dict(data, **unkeyed)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BuildOptions:
        """Options from what to_json gave."""
        return cls.make(data.get("pass_config"), data.get("device_options", ()), data.get("cuda_floor"),
                        data.get("relax_pipeline"), CpuLevel.from_json(data.get("cpu_level")), data.get("label"),
                        data.get("origin"))


@dataclass(frozen=True)
class InProcess:
    """The parts of a build's request that are objects of the caller's process (they do not travel)."""

    #: the tvm.transform.PassContext entered when jitflow.compile was called (None: none was)
    pass_context: Any = None
    #: a tvm.transform.Pass given as relax_pipeline= (None: the pipeline is named in BuildOptions)
    relax_pass: Any = None


def relax_pipeline(options: BuildOptions, in_process: InProcess) -> Any:
    """The Relax pipeline a build runs: the Pass given to compile(), else its name; None for a
    module without Relax functions."""
    return in_process.relax_pass if in_process.relax_pass is not None else options.relax_pipeline


def check_tir_pipeline(value: Any) -> None:
    """tvm.compile's tir_pipeline=: TVM's "default" is what jitflow runs; another is refused with the way."""
    if value is None or value == "default":
        return
    raise InvalidInputError(
        f"tir_pipeline={value!r} is not taken: jitflow lowers TIR with the pipeline TVM registers under its "
        "default name ('s_tir'), and keys the library by that function. To run your own, register it "
        "there (tvm.tirx.register_tir_pipeline('s_tir', pipeline)) before compiling, or apply its passes "
        "to the module before jitflow.compile(); leave tir_pipeline out")


def relax_pipeline_of(value: Any) -> tuple[str | None, Any]:
    """relax_pipeline= as (a pipeline name, None) or (None, a tvm.transform.Pass)."""
    import tvm

    if value is None:
        return DEFAULT_PIPELINE, None
    if isinstance(value, tvm.transform.Pass):
        return None, value
    if isinstance(value, str):
        known = sorted(tvm.relax.pipeline.PIPELINE_MAP)
        if value not in known:
            raise InvalidInputError(f"unknown Relax pipeline {value!r}; known: {', '.join(known)}")
        return value, None
    raise InvalidInputError(f"relax_pipeline must be a pipeline name or a tvm.transform.Pass, "
                            f"not {type(value).__name__}")
