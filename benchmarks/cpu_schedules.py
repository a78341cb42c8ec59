"""Kernels scheduled by TVM's own schedulers, for benchmarks/cpu_kernels.py:

- `dlight_kernels(level)`: the TIR functions of benchmarks/nn_models.py's CPU models (resnet18,
  mobilenet_v2, a transformer layer of width 512) after Relax's CPU legalization and fusion, each
  one that dlight's CPU rules (`GEMV`, `Reduction`, through `ApplyDefaultSchedule` under the LLVM
  target of the level: the rules read its vector width) schedule; functions alike in structure
  are listed once. `dlight_model(model, level)` is the whole model so scheduled, for `--models`.
- `tuned_kernels()`: MetaSchedule's candidates for the workloads of cpu_workloads.py, from the
  database saved under benchmarks/data/cpu_kernels (benchmarks/cpu_tune_db.py writes it): the `TOP`
  fastest of each workload and up to `WIDE` more whose vectors have 32 lanes or more. A record is
  applied by replaying its trace (postprocessing included) on the workload.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from cpu_kernel import Kernel

HERE = Path(__file__).resolve().parent
DATABASE = HERE / "data" / "cpu_kernels"
TOP, WIDE = 3, 2
#: the CPU models, as benchmarks/cold_start.py builds them
MODELS = {"resnet18": lambda m: m.resnet18(), "mobilenet_v2": lambda m: m.mobilenet_v2(),
          "transformer": lambda m: m.transformer_layer(seq=128, d=512, heads=8, ff=2048)}


def llvm_target(level: str | None) -> dict[str, Any]:
    """TVM's LLVM target for a CPU level: no -mcpu for the baseline (LLVM's generic x86-64), else the
    level's own name where this LLVM knows it (LLVM 12 and later), else the CPU that has its features."""
    from tvm.target import codegen

    if level in (None, "x86-64", "baseline"):
        return {"kind": "llvm"}
    fallback = {"x86-64-v2": "nehalem", "x86-64-v3": "haswell", "x86-64-v4": "skylake-avx512"}
    mcpu = level if codegen.llvm_is_valid_cpu(level, "x86_64-unknown-linux-gnu") else fallback[level]
    return {"kind": "llvm", "mcpu": mcpu}


# -- dlight ------------------------------------------------------------------------------------

def model(name: str) -> Any:
    """One of nn_models' CPU models (a Model: .mod, .example_input())."""
    import nn_models

    return MODELS[name](nn_models)


def dlight_model(name: str, level: str | None) -> Any:
    """The model's Relax module after the CPU legalization and fusion passes, its TIR functions
    scheduled by dlight's CPU rules where they apply (TVM's default pipeline then finishes it)."""
    import tvm
    from tvm import relax
    from tvm.s_tir import dlight

    target = tvm.target.Target(llvm_target(level))
    with target:
        mod = tvm.transform.Sequential(relax.pipeline.library_dispatch_passes(target)
                                       + relax.pipeline.legalize_passes(target))(model(name).mod)
        return dlight.ApplyDefaultSchedule(dlight.cpu.GEMV(), dlight.cpu.Reduction())(mod)


@functools.lru_cache(maxsize=None)
def _dlight_functions(level: str | None) -> dict[str, Any]:
    """name -> each distinct PrimFunc that dlight scheduled, over the models."""
    import tvm
    import tvm_ffi

    found: dict[str, Any] = {}
    seen: set[int] = set()
    for name in MODELS:
        for gv, func in dlight_model(name, level).functions_items():
            if not isinstance(func, tvm.tirx.PrimFunc) or not func.attrs or "tirx.is_scheduled" not in func.attrs:
                continue
            key = tvm_ffi.structural_hash(func.without_attr("global_symbol"))
            if key not in seen:
                seen.add(key)
                found[f"dlight/{name}/{gv.name_hint}"] = func
    return found


def dlight_kernels(level: str | None) -> list[Kernel]:
    """The dlight-scheduled functions of the models (building the models' TIR once a process)."""
    import tvm

    def make(name: str) -> Any:
        return tvm.IRModule({"main": _dlight_functions(level)[name].with_attr("global_symbol", "main")})

    return [Kernel(name, functools.partial(make, name), rtol=1e-3, atol=1e-4) for name in _dlight_functions(level)]


# -- MetaSchedule ------------------------------------------------------------------------------

def open_database(folder: Path = DATABASE, create: bool = False) -> Any:
    """The saved MetaSchedule database in `folder` (workloads.json, records.json)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.database.JSONDatabase(str(folder / "workloads.json"), str(folder / "records.json"),
                                    allow_missing=create)


def lanes(mod: Any) -> int:
    """The longest vectorized loop of a scheduled module (1 when it has none)."""
    import tvm
    import tvm_ffi

    widths = [1]

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.kind == tvm.tirx.ForKind.VECTORIZED:
            widths.append(int(node.extent) if isinstance(node.extent, tvm.tirx.IntImm) else 1)

    for _, func in mod.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, visit)
    return max(widths)


def scheduled(record: Any) -> Any:
    """The workload's module with the record's trace applied (MetaSchedule's postprocessing included)."""
    from tvm import s_tir

    sch = s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch.mod


def seconds(record: Any) -> float:
    """The record's mean measured time; infinite for a candidate that failed (MetaSchedule saves
    failures with a time of 1e10 s)."""
    runs = [float(s) for s in (record.run_secs or [])]
    mean = sum(runs) / len(runs) if runs else float("inf")
    return mean if mean < 1e9 else float("inf")


def records_by_workload(folder: Path = DATABASE) -> dict[str, list[Any]]:
    """The saved records of each workload of cpu_workloads.py, fastest first (workloads whose
    definition changed since tuning have none)."""
    import cpu_workloads
    import tvm_ffi

    if not (folder / "records.json").exists():
        return {}
    mods = {name: cpu_workloads.module(name) for name in cpu_workloads.WORKLOADS}
    found: dict[str, list[Any]] = {}
    for record in open_database(folder).get_all_tuning_records():
        for name, mod in mods.items():
            if tvm_ffi.structural_equal(record.workload.mod, mod):
                found.setdefault(name, []).append(record)
    return {name: sorted(rs, key=seconds) for name, rs in found.items()}


@functools.lru_cache(maxsize=None)
def _tuned_modules() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for workload, records in records_by_workload().items():
        wide = 0
        for rank, record in enumerate(r for r in records if seconds(r) < float("inf")):
            if rank >= TOP and wide >= WIDE:
                break
            mod = scheduled(record)
            width = lanes(mod)
            if rank < TOP:
                out[f"tuned/{workload}/r{rank + 1}" + (f"_x{width}" if width >= 32 else "")] = mod
            elif width >= 32:
                out[f"tuned/{workload}/r{rank + 1}_x{width}"] = mod
                wide += 1
    return out


def tuned_kernels() -> list[Kernel]:
    """MetaSchedule's candidates from the saved database (none where it is missing)."""
    def make(name: str) -> Any:
        return _tuned_modules()[name]

    return [Kernel(name, functools.partial(make, name), rtol=1e-3, atol=1e-4) for name in _tuned_modules()]
