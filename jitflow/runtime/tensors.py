"""Tensors and devices over tvm_ffi alone: `.numpy()` on the tensors that calls return, numpy arrays
into TVM tensors, and devices from the spellings users give.

tvm_ffi's Tensor exports DLPack but has no `.numpy()`; TVM's Python package adds it by registering
its own Tensor class. Where no such class is registered yet, jitflow registers a small one of the
same layout with `.numpy()`; a later `import tvm` registers TVM's over it (tvm_ffi allows that), so
in a process that uses TVM, calls return TVM's tensors as before.
"""
from __future__ import annotations

import sys
from typing import Any

from ..errors import InvalidInputError
from ..text.format import article

_installed = False
_EXOTIC = ("bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
           "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")


def _global(name: str) -> Any:
    import tvm_ffi

    return tvm_ffi.get_global_func(name)


def numpy_dtype(dtype: str) -> Any:
    """The numpy dtype of a TVM dtype name (ml_dtypes for bfloat16 and the float8 kinds)."""
    import numpy as np

    if dtype in _EXOTIC:
        try:
            import ml_dtypes
        except ImportError:
            raise InvalidInputError(f"converting {article(dtype)} {dtype} tensor to numpy needs ml_dtypes "
                                    "(pip install ml_dtypes)") from None
        return np.dtype(getattr(ml_dtypes, dtype))
    try:
        return np.dtype(dtype)
    except TypeError:
        raise InvalidInputError(f"{article(dtype)} {dtype} tensor has no numpy counterpart; read it through DLPack "
                                "(torch.from_dlpack) instead") from None


def to_numpy(tensor: Any) -> Any:
    """A numpy copy of a tensor on any device (copied to the host through TVM's runtime)."""
    import ctypes

    import numpy as np
    import tvm_ffi

    dtype = tvm_ffi.dtype(str(tensor.dtype))
    shape = tuple(tensor.shape) + ((dtype.lanes,) if dtype.lanes > 1 else ())
    out = np.empty(shape, numpy_dtype(str(dtype.with_lanes(1)) if dtype.lanes > 1 else str(dtype)))
    _global("runtime.TVMTensorCopyToBytes")(tensor, ctypes.c_void_p(out.ctypes.data), out.nbytes)
    return out


def from_numpy(array: Any, device: Any = None) -> Any:
    """A TVM tensor holding a copy of a numpy array (on the CPU unless `device` says otherwise),
    allocated by TVM's runtime with its alignment."""
    import ctypes

    import numpy as np
    import tvm_ffi

    array = np.ascontiguousarray(array)
    dev = device if device is not None else tvm_ffi.device("cpu", 0)
    tensor = _global("runtime.TVMTensorAllocWithScope")(tvm_ffi.Shape(array.shape), str(array.dtype), dev, None)
    _global("runtime.TVMTensorCopyFromBytes")(tensor, ctypes.c_void_p(array.ctypes.data), array.nbytes)
    return tensor


def compact_if_empty(arg: Any) -> Any:
    """`arg`, except a numpy array with no elements, which is given C-order strides (a view: nothing
    is copied). numpy gives such arrays strides of 0, which TVM refuses ("expected to be compact")
    although there is nothing to read; every other argument passes through as it is."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(arg, np.ndarray) or arg.size or not arg.ndim:
        return arg
    strides = [arg.itemsize]
    for extent in reversed(arg.shape[1:]):
        strides.insert(0, strides[0] * max(1, extent))
    return np.lib.stride_tricks.as_strided(arg, strides=tuple(strides))


def install() -> None:
    """Give the tensors that calls return a `.numpy()`, where no Tensor class with one is registered."""
    global _installed
    if _installed:
        return
    import tvm_ffi

    _installed = True
    if tvm_ffi.core._CLASS_TENSOR is not tvm_ffi.core.Tensor:   # TVM's (or another) class is in place
        return

    class Tensor(tvm_ffi.core.Tensor):
        """A tvm_ffi Tensor with `.numpy()` (a copy to the host), for processes without `import tvm`."""

        __slots__ = ()

        def numpy(self) -> Any:
            return to_numpy(self)

    Tensor.__qualname__ = "Tensor"
    tvm_ffi.register_object("ffi.Tensor")(Tensor)
    tvm_ffi.core._set_class_tensor(Tensor)


def device_of(device: Any, cuda: bool) -> Any:
    """A Device from a Device (tvm_ffi's or TVM's), "cpu", "cuda", "cuda:1", or a torch.device; None
    picks the library's own kind (the first GPU for a CUDA library, else the CPU)."""
    import tvm_ffi

    if device is None:
        return tvm_ffi.device("cuda" if cuda else "cpu", 0)
    if isinstance(device, tvm_ffi.Device):
        return device
    if isinstance(device, str):
        text = device
    elif hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        text = device.type if device.index is None else f"{device.type}:{device.index}"
    else:
        raise InvalidInputError(f"device must be a tvm Device, a string such as 'cuda:0' or a torch.device, "
                                f"not {type(device).__name__}")
    try:
        return tvm_ffi.device(text)
    except Exception:
        raise InvalidInputError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'") from None
