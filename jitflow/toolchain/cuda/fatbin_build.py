"""Put cubins and PTX into one fatbin with nvfatbin (NVIDIA's pip wheel, or a CUDA toolkit's library)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from ...errors import CompileError, ToolMissingError

INSTALL_HINT = "install the CUDA extra: pip install 'jitflow[cuda]' (NVRTC, nvfatbin and CCCL wheels)"


@dataclass(frozen=True)
class Image:
    """One fatbin entry to add: SASS (a cubin) or PTX text for an arch ('sm_80' / 'compute_80')."""

    kind: str       # "sass" or "ptx"
    arch: str
    data: bytes


#: the wheel that brings libnvfatbin, and how to install it
WHEEL = "nvidia-nvfatbin"
WHEEL_HINT = f"pip install '{WHEEL}>=13,<14' (or the CUDA extra: pip install 'jitflow[cuda]')"


def loaded_binding(name: str, first_call: str, what: str, hint: str):
    """cuda-python's `cuda.bindings.<name>` with its library loaded by calling `first_call` (the
    bindings import without the library and fail at their first call): a ToolMissingError otherwise,
    naming `what` did not load (cuda.pathfinder's DynamicLibNotFoundError, seen where another
    package's CUDA wheels come first on the path, or a broken library) and `hint`, the wheel."""
    try:
        module = importlib.import_module(f"cuda.bindings.{name}")
    except ImportError as exc:
        raise ToolMissingError(f"cuda-python is not importable ({exc}); {INSTALL_HINT}") from None
    try:
        getattr(module, first_call)()
    except Exception as exc:  # noqa: BLE001 - whatever stopped the library from loading, reported
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ToolMissingError(f"{what} cannot be loaded ({reason}); {hint}") from None
    return module


def _nvfatbin():
    return loaded_binding("nvfatbin", "version", "nvfatbin's library (libnvfatbin.so.13)", WHEEL_HINT)


def require() -> None:
    """A ToolMissingError naming the wheel to install unless nvfatbin can be loaded (checked before
    NVRTC's compiles, so that a build without it fails at once, not after compiling)."""
    _nvfatbin()


def version() -> str:
    """The version of the nvfatbin in use ('13.5'); a ToolMissingError where there is none."""
    major, minor = _nvfatbin().version()
    return f"{major}.{minor}"


def build(images: list[Image], name: str = "kernels") -> bytes:
    """The fatbin holding `images` in order (nvfatbin compresses PTX as it adds it)."""
    nvfatbin = _nvfatbin()
    handle = nvfatbin.create([], 0)
    try:
        for image in images:
            number = image.arch.split("_", 1)[1]
            label = f"{name}_{image.arch}"
            if image.kind == "sass":
                nvfatbin.add_cubin(handle, image.data, len(image.data), number, label)
            else:
                text = image.data if image.data.endswith(b"\0") else image.data + b"\0"
                nvfatbin.add_ptx(handle, text, len(text), number, label, "")
        out = bytearray(nvfatbin.size(handle))
        nvfatbin.get(handle, out)
        return bytes(out)
    except Exception as exc:  # nvfatbin raises its own error type
        raise CompileError("nvfatbin", "nvfatbin create/add/get", str(exc)) from None
    finally:
        nvfatbin.destroy(handle)
