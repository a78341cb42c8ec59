"""One kernel or model built by jitflow ("c" at a CPU level) and by TVM's LLVM host (the same level),
checked equal, then timed interleaved: benchmarks/cpu_kernels.py's child processes call this.

Timing: both builds are called once (the check), then `runs` samples of each, alternating which goes
first. A sample is the mean of `number` calls, one `number` for both sides, chosen so that the
slower side's sample lasts `min_sample_s` (and a kernel whose samples have taken `budget_s`
stops at MIN_RUNS or later): for calls shorter than that TVM's time evaluator makes
the calls (no Python between calls), for longer ones a Python loop timed with perf_counter (the
evaluator's extra warm-up call would double the run). Rows report the median and the minimum.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import numpy as np
from cpu_kernel import Kernel
from cpu_schedules import llvm_target

#: the fewest samples of each side, whatever the time budget
MIN_RUNS = 3


def first_line(error: BaseException) -> str:
    """The first informative line of an error (TVM's and jitflow's errors run to many lines)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    wanted = [ln for ln in lines if not ln.startswith(("Traceback", "File ", "^"))] or lines
    text = wanted[0] if wanted else ""
    if text.endswith(":") and len(wanted) > 1:   # "TVM could not lower the module for c:" says why next
        text = f"{text} {wanted[1]}"
    return f"{type(error).__name__}: {text}"[:300]


# -- building ----------------------------------------------------------------------------------

def build_llvm(mod: Any, level: str | None) -> Any:
    """The module built by tvm.compile for LLVM at the level, as a runtime module."""
    import tvm

    return tvm.compile(mod, target=tvm.target.Target(llvm_target(level))).jit()


def build_jitflow(mod: Any, level: str | None, label: str) -> Any:
    """The module built (or found in the cache) by jitflow's C host at the level, loaded."""
    import jitflow

    return jitflow.compile(mod, "c", cpu_level=level, name=label).jit()


# -- arguments and the check -------------------------------------------------------------------

def arguments(func: Any, kernel: Kernel, rng: np.random.Generator) -> list[Any]:
    """Inputs for every parameter of the PrimFunc: float buffers filled as the kernel says, other
    buffers zero, scalars and symbolic extents from the kernel's sizes."""
    import tvm

    sizes = kernel.sizes

    def extent(e: Any) -> int:
        return int(e) if isinstance(e, (int, tvm.tirx.IntImm)) else sizes[e.name]

    out: list[Any] = []
    for param in func.params:
        buffer = param.ty   # a buffer parameter's type holds its shape and dtype
        if not isinstance(buffer, tvm.tirx.buffer.BufferType):
            out.append(sizes[param.name])
            continue
        shape, dtype = tuple(extent(e) for e in buffer.shape), str(buffer.dtype)
        if dtype.startswith(("float", "bfloat")):
            data = rng.uniform(0.1, 4.0, shape) if kernel.fill == "positive" else rng.standard_normal(shape)
            out.append(data.astype(dtype))
        else:
            out.append(np.zeros(shape, dtype))
    return out


def to_device(values: list[Any]) -> list[Any]:
    import tvm

    return [tvm.runtime.tensor(v) if isinstance(v, np.ndarray) else v for v in values]


def mismatch(ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when jitflow's result is LLVM's within |a - b| <= atol * scale + rtol * |b| (scale: the
    largest magnitude in LLVM's result, at least 1; NaN and infinities must sit in the same places)."""
    a, b = ours.astype("float64"), theirs.astype("float64")
    finite = np.isfinite(b)
    if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(np.isnan(a), np.isnan(b)):
        return "non-finite values differ"
    if not finite.any():
        return None
    scale = max(1.0, float(np.abs(b[finite]).max()))
    err = np.abs(a[finite] - b[finite])
    bad = err > atol * scale + rtol * np.abs(b[finite])
    if not bad.any():
        return None
    worst = int(np.argmax(err))
    return (f"{int(bad.sum())} of {bad.size} values differ (largest difference {err[worst]:.3g} "
            f"against {b[finite][worst]:.3g}; rtol {rtol:g}, atol {atol:g} x {scale:.3g})")


# -- timing ------------------------------------------------------------------------------------

#: the clocks a sample may be read from: "wall" (perf_counter), or "thread": the calling thread's CPU
#: time, which leaves out the time other processes took the core (a shared machine); it covers only
#: work done in that thread, so it measures a kernel at one thread (TVM's pool runs the parallel
#: body in the calling thread then), not at more
CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def _python_timer(call: Callable[[], Any], number: int, clock: str = "wall") -> Callable[[], float]:
    now = CLOCKS[clock]

    def sample() -> float:
        start = now()
        for _ in range(number):
            call()
        return (now() - start) / number
    return sample


def _evaluator_timer(module: Any, args: list[Any], number: int) -> Callable[[], float]:
    import struct

    import tvm
    from tvm.runtime import _ffi_api

    dev = tvm.cpu(0)
    feval = _ffi_api.RPCTimeEvaluator(module, "main", dev.dlpack_device_type(), dev.index, number, 1, 0, 100, 0, 1,
                                      0, "")
    return lambda: struct.unpack("@d", feval(*args))[0]


def interleaved(samplers: dict[str, Callable[[], float]], runs: int,
                budget_s: float = float("inf")) -> dict[str, dict[str, float]]:
    """`runs` samples of each sampler, the order alternating (fewer, but at least MIN_RUNS, once
    the samples together have taken `budget_s`); median and minimum of each, in seconds."""
    import gc

    names = list(samplers)
    times: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    gc.collect()
    gc.disable()
    try:
        for r in range(runs):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(samplers[name]())
            if r + 1 >= MIN_RUNS and time.perf_counter() - start > budget_s:
                break
    finally:
        gc.enable()
    return {n: {"median": statistics.median(t), "min": min(t), "samples": len(t)} for n, t in times.items()}


def _number(seconds: float, min_sample_s: float) -> int:
    return max(1, math.ceil(min_sample_s / max(seconds, 1e-9)))


def _once(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def row(name: str, **fields: Any) -> dict[str, Any]:
    out = {"name": name, "group": name.split("/", 1)[0]}
    out.update(fields)
    if "jitflow" in out and "llvm" in out:
        out["ratio"] = out["jitflow"]["median"] / out["llvm"]["median"]
        out["ratio_min"] = out["jitflow"]["min"] / out["llvm"]["min"]
        out["status"] = "ok"
    return out


def time_kernel(kernel: Kernel, level: str | None, runs: int, min_sample_s: float,
                budget_s: float = float("inf"), clock: str = "wall") -> dict[str, Any]:
    """A kernel's row: built both ways, checked, timed on `clock` (CLOCKS; or the first line of what
    failed)."""
    try:
        mod = kernel.make()
    except Exception as e:  # noqa: BLE001 - a row, never a crash
        return row(kernel.name, status="failed", error=f"schedule: {first_line(e)}")
    built: dict[str, Any] = {}
    for side, build in (("llvm", lambda: build_llvm(mod, level)),
                        ("jitflow", lambda: build_jitflow(mod, level, f"cpu_kernels {kernel.name}"))):
        try:
            built[side] = build()
        except Exception as e:  # noqa: BLE001
            return row(kernel.name, status="failed", error=f"{side} build: {first_line(e)}")
    func = mod["main"]
    host = arguments(func, kernel, np.random.default_rng(0))
    args = {side: to_device(host) for side in built}
    calls = {side: (lambda m=built[side], a=args[side]: m["main"](*a)) for side in built}
    elapsed = {}
    for side in built:
        try:
            elapsed[side] = _once(calls[side])
        except Exception as e:  # noqa: BLE001
            return row(kernel.name, status="failed", error=f"{side} call: {first_line(e)}")
    for n, (ours, theirs) in enumerate(zip(args["jitflow"], args["llvm"])):
        if isinstance(ours, int):
            continue
        wrong = mismatch(ours.numpy(), theirs.numpy(), kernel.rtol, kernel.atol)
        if wrong:
            return row(kernel.name, status="mismatch", error=f"argument {n} ({func.params[n].name}): {wrong}")
    # a second call each: the first may have paid for page faults and the thread pool's start
    slowest = max(_once(calls[side]) for side in built)
    number = _number(slowest, min_sample_s)
    if number > 1 and clock == "wall":
        samplers = {side: _evaluator_timer(built[side], args[side], number) for side in built}
    else:
        samplers = {side: _python_timer(calls[side], number, clock) for side in built}
    result = interleaved(samplers, runs, budget_s)
    return row(kernel.name, number=number, **result)


def time_model(name: str, scheduled: bool, level: str | None, runs: int, min_sample_s: float,
               budget_s: float = float("inf")) -> dict[str, Any]:
    """A whole model's row: jitflow's VM against tvm.compile + VM (one input), checked, timed."""
    import cpu_schedules
    import tvm
    from tvm import relax

    import jitflow

    label = f"model/{name}" + ("/dlight" if scheduled else "")
    try:
        model = cpu_schedules.model(name)
        mod = cpu_schedules.dlight_model(name, level) if scheduled else model.mod
    except Exception as e:  # noqa: BLE001
        return row(label, status="failed", error=f"schedule: {first_line(e)}")
    dev = tvm.cpu(0)
    vms: dict[str, Any] = {}
    try:
        vms["llvm"] = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target(llvm_target(level))), dev)
    except Exception as e:  # noqa: BLE001
        return row(label, status="failed", error=f"llvm build: {first_line(e)}")
    try:
        vms["jitflow"] = jitflow.compile(mod, "c", cpu_level=level, name=f"cpu_kernels {label}").vm(dev)
    except Exception as e:  # noqa: BLE001
        return row(label, status="failed", error=f"jitflow build: {first_line(e)}")
    x = tvm.runtime.tensor(model.example_input(), dev)
    calls = {side: (lambda vm=vms[side]: vm["forward"](x)) for side in vms}
    outs = {}
    for side in vms:
        try:
            outs[side] = calls[side]()
        except Exception as e:  # noqa: BLE001
            return row(label, status="failed", error=f"{side} call: {first_line(e)}")
    wrong = mismatch(outs["jitflow"].numpy(), outs["llvm"].numpy(), 1e-3, 1e-4)
    if wrong:
        return row(label, status="mismatch", error=wrong)
    number = _number(max(_once(calls[side]) for side in vms), min_sample_s)
    result = interleaved({side: _python_timer(calls[side], number) for side in vms}, runs, budget_s)
    return row(label, number=number, **result)
