"""jitflow.meta_schedule.Builder: MetaSchedule's candidates built by jitflow.build_all.

For each BuilderInput it does what LocalBuilder's default build does first (the weight layout
rewrite blocks removed, skip_tensor_rewrite=True), then compiles the module with jitflow.compile for
the target as it is (jitflow.targets.reading reads it, as for any compile: the best record compiled
afterwards with the same target is the library that was measured), labelled in the cache by workload and candidate (`jitflow cache ls`), and
builds every candidate of the batch in one build_all: here in forked processes, or on a Ray cluster.
A candidate already in the cache is a hit (MetaSchedule drawing it again: docs/tuning.md says when); each artifact is a copy
in a folder of its own (artifacts.py); a failure, a candidate past `timeout_s` included, is a
BuilderResult whose error_msg is jitflow's message.
"""
from __future__ import annotations

import logging
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder

from ..errors import InvalidInputError, ToolMissingError
from ..executable import compile as jitflow_compile
from ..farm import build_all
from ..farm.result import BACKENDS
from ..inputs import tuned
from ..logs import already_said
from ..targets.spec import LLVM_AS_C
from . import artifacts, targets

log = logging.getLogger("jitflow")


def label(mod: Any) -> str:
    """`<function> candidate <id>`: the tuned function's name (its global_symbol, else its name in the
    module), the id the first 12 hex digits of the candidate module's structural hash."""
    import tvm_ffi

    names = []
    for gvar, func in mod.functions.items():
        attrs = getattr(func, "attrs", None)
        symbol = attrs.get("global_symbol") if attrs is not None and "global_symbol" in attrs else None
        names.append(str(symbol or gvar.name_hint))
    digest = tvm_ffi.structural_hash(mod) & ((1 << 48) - 1)
    return f"{'+'.join(sorted(names))} candidate {digest:012x}"


def prepared(build_input: BuilderInput) -> Any:
    """The module LocalBuilder's default build would lower: its weight layout rewrite blocks removed
    (the params are not used by a TIR build, as in LocalBuilder's default)."""
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(build_input.mod)


@derived_object
class Builder(PyBuilder):
    """A MetaSchedule Builder (ms.tune_tir, ms.tune_tasks, ms.relax_integration.tune_relax accept it as
    builder=) that builds with jitflow.

    jobs: build processes (local) or tasks at once (ray); None: one per CPU, or the whole cluster.
    backend: "local" (forked processes here) or "ray" (the Ray cluster this process is connected to;
    the runner stays where the device is: docs/tuning.md). timeout_s: seconds one candidate may
    build (None: no limit); past it its compiler is killed and it is reported as an error.
    cache_dir: the cache the candidates go to (default: jitflow's, JITFLOW_CACHE_DIR).
    """

    jobs: int | None
    backend: str
    timeout_s: float | None

    def __init__(self, jobs: int | None = None, backend: str = "local", timeout_s: float | None = 30.0,
                 cache_dir: str | None = None) -> None:
        super().__init__()
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise InvalidInputError(f"jobs must be a whole number, 1 or more (or None for one per CPU), not {jobs!r}")
        if backend not in BACKENDS:
            raise InvalidInputError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, not {backend!r}")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or not timeout_s > 0):
            raise InvalidInputError(f"timeout_s must be a number of seconds above 0 (or None), not {timeout_s!r}")
        if backend == "ray":
            import importlib.util

            if importlib.util.find_spec("ray") is None:
                raise ToolMissingError("Builder(backend='ray') needs Ray: pip install 'jitflow[ray]'")
        self.jobs, self.backend, self.timeout_s = jobs, backend, timeout_s
        self.cache_dir = cache_dir

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        """Build every candidate (hits for those in the cache); one BuilderResult each, in order."""
        results: list[BuilderResult | None] = [None] * len(build_inputs)
        # MetaSchedule tunes CPU kernels for an llvm target, which jitflow builds as its C host; the tuner
        # cannot be told 'c', so the warning that says so would only be noise here
        already_said(LLVM_AS_C)
        exes: list[Any] = []
        where: list[int] = []
        for i, build_input in enumerate(build_inputs):
            try:
                mod = prepared(build_input)
                exe = jitflow_compile(mod, targets.checked(build_input.target), cache_dir=self.cache_dir,
                                      name=label(mod))
                if exe.target.kind == "c":      # a later compile of it at another CPU level is said (inputs/tuned.py)
                    tuned.remember(exe.mod, tuned.level_name(exe.options.cpu_level, exe.target.host), exe.options.label)
                exes.append(exe)
                where.append(i)
            except Exception as exc:  # noqa: BLE001 - the candidate's error, reported with it
                results[i] = BuilderResult(None, _message(type(exc).__name__, str(exc)))
        if exes:
            for i, done in zip(where, build_all(exes, jobs=self.jobs, backend=self.backend,
                                                timeout_s=self.timeout_s)):
                results[i] = self._artifact(done)
        return [r for r in results if r is not None]

    @staticmethod
    def _artifact(done: Any) -> BuilderResult:
        if not done.ok:
            return BuilderResult(None, _message(done.error_type or "JitflowError", done.error or ""))
        try:
            return BuilderResult(str(artifacts.copy_of(done.executable)), None)
        except Exception as exc:  # noqa: BLE001 - a copy that failed is the candidate's error
            return BuilderResult(None, _message(type(exc).__name__, str(exc)))


def _message(error_type: str, text: str) -> str:
    return f"jitflow.meta_schedule.Builder: {error_type}: {text}"
