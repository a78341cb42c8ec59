"""A Relax VirtualMachine over a loaded library, through tvm_ffi alone.

The VM lives in TVM's runtime library; TVM's Python class (tvm.runtime.vm.VirtualMachine) is a thin
layer over the VM module's packed functions (vm_load_executable, vm_initialization, set_input, ...)
that needs the `tvm` package. This is the same layer, with the methods users call on TVM's class, so
a process that only loads libraries never imports TVM.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from numbers import Integral, Number
from typing import Any, Callable, Sequence

from . import tensors

NAIVE_ALLOCATOR, POOLED_ALLOCATOR = 1, 2
_ALLOCATORS = {"naive": NAIVE_ALLOCATOR, "pooled": POOLED_ALLOCATOR}
_RPC_SESS_MASK = 128
_CPU = 1   # DLPack's kDLCPU


def _stats() -> Any:
    import statistics

    return statistics


@dataclass(frozen=True)
class BenchmarkResult:
    """Times (seconds) of the repeats of a time_evaluator run, with TVM's summary attributes."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return _stats().fmean(self.results)

    @property
    def median(self) -> float:
        return _stats().median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return _stats().pstdev(self.results)

    def __str__(self) -> str:
        return (f"Execution time summary: mean {self.mean * 1e3:.4f} ms, median {self.median * 1e3:.4f} ms, "
                f"max {self.max * 1e3:.4f} ms, min {self.min * 1e3:.4f} ms, std {self.std * 1e3:.4f} ms")


class VirtualMachine:
    """A Relax VM on `device` (a Device or a list of them; the CPU is added for shape functions).

    memory_cfg: "pooled" (reuses freed blocks; the default), "naive", or a dict of device -> one of
    them. vm["fn"] is the VM function (VMFunction: TVM's, DLPack tensors in, tensors out).
    """

    NAIVE_ALLOCATOR, POOLED_ALLOCATOR = NAIVE_ALLOCATOR, POOLED_ALLOCATOR    # as TVM's class names them

    def __init__(self, library: Any, device: Any, memory_cfg: str | dict[Any, str] | None = None,
                 functions: Callable[[], Sequence[str] | None] | None = None) -> None:
        """functions: what names the VM's functions when vm[name] has none of that name (None: not known)."""
        self.module = library["vm_load_executable"]()
        self._functions = functions
        devices = list(device) if isinstance(device, (list, tuple)) else [device]
        if devices[-1].dlpack_device_type() % _RPC_SESS_MASK != _CPU:
            devices.append(tensors.device_of("cpu", False))
        default = _ALLOCATORS[memory_cfg] if isinstance(memory_cfg, str) else POOLED_ALLOCATOR
        chosen = memory_cfg if isinstance(memory_cfg, dict) else {}
        init: list[int] = []
        for dev in devices:
            kind = chosen.get(dev)
            init += [dev.dlpack_device_type() % _RPC_SESS_MASK, dev.index,
                     _ALLOCATORS[kind] if kind is not None else default]
        self.module["vm_initialization"](*init)

    def __getitem__(self, name: str) -> Any:
        try:
            return VMFunction(self.module[name])
        except AttributeError:
            from ..errors import FunctionNotFoundError

            names = self._functions() if self._functions is not None else None
            if names is None:
                raise FunctionNotFoundError(name, [], note="the VM's functions could not be read") from None
            raise FunctionNotFoundError(name, names) from None

    def invoke_closure(self, closure: Any, *args: Any) -> Any:
        return self.module["invoke_closure"](closure, *args)

    def save_function(self, func_name: str, saved_name: str, *args: Any, include_return: bool = True,
                      **kwargs: Any) -> None:
        """Save fn with its arguments bound under `saved_name` (a call with less lookup, for timing)."""
        self.module["save_function"](func_name, saved_name, int(include_return),
                                     *self._arguments(func_name, args, kwargs))

    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Set the inputs of a function for invoke_stateful (numpy arrays are copied into TVM tensors)."""
        self.module["set_input"](func_name, *self._arguments(func_name, args, kwargs))

    def invoke_stateful(self, func_name: str) -> None:
        self.module["invoke_stateful"](func_name)

    def get_outputs(self, func_name: str) -> Any:
        """The result of the last invoke_stateful of the function (nested tuples as tuples)."""
        def output(*index: int) -> Any:
            arity = self.module["get_output_arity"](func_name, *index)
            if arity == -1:
                return self.module["get_output"](func_name, *index)
            return tuple(output(*index, i) for i in range(arity))

        return output()

    def set_instrument(self, instrument: Any) -> None:
        self.module["set_instrument"](instrument)

    def time_evaluator(self, func_name: str, dev: Any, number: int = 10, repeat: int = 1, min_repeat_ms: int = 0,
                       cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1, f_preproc: str = "") -> Any:
        """A function that times `func_name` on `dev` as TVM's time_evaluator does (a BenchmarkResult)."""
        import tvm_ffi

        feval = tvm_ffi.get_global_func("runtime.RPCTimeEvaluator")(
            self.module, func_name, dev.dlpack_device_type(), dev.index, number, repeat, min_repeat_ms, 100,
            cooldown_interval_ms, repeats_to_cooldown, 0, f_preproc)

        def evaluator(*args: Any) -> BenchmarkResult:
            return BenchmarkResult(struct.unpack("@" + "d" * repeat, bytes(feval(*args))))

        return evaluator

    def _arguments(self, func_name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        if kwargs:
            arity = self.module["get_function_arity"](func_name)
            names = [self.module["get_function_param_name"](func_name, i) for i in range(arity)]
            unknown = sorted(set(kwargs) - set(names))
            if unknown or len(args) + len(kwargs) != arity:
                from ..errors import InvalidInputError

                raise InvalidInputError(f"{func_name} takes {', '.join(names)}; got {len(args)} positional "
                                        f"arguments and {', '.join(kwargs) or 'no names'}")
            rest = iter(args)
            args = [kwargs[n] if n in kwargs else next(rest) for n in names]
        return [_converted(a) for a in args]


class VMFunction:
    """A function of the VM, called as TVM's own (tensors and numpy arrays through DLPack, without a
    copy), except that a numpy array with no elements is first given the strides TVM checks for
    (tensors.compact_if_empty). `.function` is TVM's function itself."""

    __slots__ = ("function",)

    def __init__(self, function: Any) -> None:
        self.function = function

    def __call__(self, *args: Any) -> Any:
        return self.function(*[tensors.compact_if_empty(a) for a in args])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)


def _converted(arg: Any) -> Any:
    """An argument as TVM's VM takes it: numpy arrays and numbers as CPU tensors, tuples of them."""
    import numpy as np

    if isinstance(arg, np.ndarray):
        return tensors.from_numpy(arg)
    if isinstance(arg, (tuple, list)):
        return tuple(_converted(a) for a in arg)
    if isinstance(arg, (Number, np.generic)):
        dtype = "float16" if isinstance(arg, np.float16) else "int32" if isinstance(arg, (Integral, bool)) \
            else "float32"
        return tensors.from_numpy(np.array(arg, dtype=dtype))
    return arg
