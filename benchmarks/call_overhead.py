"""Microseconds per call from Python with three torch CUDA tensors: a shipped jitflow kernel beside
torch.add(out=), a Triton kernel and a raw cuLaunchKernel of the same kernel, in one run, and where
one call's time goes.

    python benchmarks/call_overhead.py [LIBRARY.so] [--calls 20000] [--rounds 9]

LIBRARY.so is an exported vector add of 1024 floats, main(a, b, c) (tests/gpu_artifacts.py builds
.gpu-artifacts/vecadd.so; without one it is built here, which needs TVM's compiler). Needs a GPU and
torch; Triton is measured where it is importable. Every row is the median of interleaved rounds.

The profile takes one call apart by difference, each row a measured call:
  a Python function                         the interpreter's call
  tvm_ffi testing.nop()                     tvm_ffi's call into C++, no arguments
  tvm_ffi testing.nop(a, b, c)              + converting three torch tensors (DLPack exchange)
  TVM's launcher alone                      the CUDA module's kernel function: pointers and launch
                                            dimensions in, TVM's launch (cuLaunchKernel) out
  the jitflow kernel                        + the host function (argument checks, the launcher's
                                            lookup), that is, all of it
  cuLaunchKernel through cuda.bindings      the driver's launch, with cuda.bindings' own Python cost
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def per_call_us(fns: dict, calls: int, rounds: int) -> dict:
    """Median microseconds per call of each function (no arguments: bound beforehand), interleaved."""
    import torch

    samples: dict = {name: [] for name in fns}
    for f in fns.values():
        for _ in range(1000):
            f()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for name, f in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                f()
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


def _library(given: str | None, folder: str) -> Path:
    if given:
        return Path(given)
    import kernels

    import jitflow
    from jitflow.targets import visible_gpu_arch

    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=visible_gpu_arch() or "sm_90")
    return exe.export_library(Path(folder) / "vecadd.so")


def _kernel_info(path: Path) -> tuple[bytes, str, list[str]]:
    """(fatbin, kernel name, launch parameter tags) of the library's one CUDA kernel."""
    from jitflow.formats import library_blob

    (raw,) = library_blob.payloads_of(path, "cuda")
    payload = library_blob.parse_cuda_payload(raw)
    (kernel,) = payload.kernels
    return payload.data, kernel.name, kernel.launch_params


def _launch_dims(tags: list[str]) -> list[int]:
    """Launch dimensions of the 1024-element vector add (128 threads a block) for TVM's tags."""
    return [{"blockIdx.x": 8, "threadIdx.x": 128}.get(t, 1) for t in tags]


def _raw_launch(fatbin: bytes, name: str, tensors: list, stream: int):
    """A function launching the kernel through cuda.bindings' cuLaunchKernel on `stream`."""
    from cuda.bindings import driver

    err, module = driver.cuModuleLoadData(fatbin)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    err, function = driver.cuModuleGetFunction(module, name.encode())
    assert err == driver.CUresult.CUDA_SUCCESS, err
    pointers = [ctypes.c_void_p(t.data_ptr()) for t in tensors]
    params = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(p) for p in pointers])

    def launch():
        driver.cuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 0, stream, ctypes.addressof(params), 0)

    launch.keep = (module, pointers, params)
    return launch


def _triton_add():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)

    return add


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", nargs="?")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import torch

    import jitflow

    torch.cuda.init()
    with tempfile.TemporaryDirectory() as tmp:
        path = _library(args.library, tmp)
        module = jitflow.load(path)
    import tvm_ffi

    kernel = module["main"]
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    fatbin, name, tags = _kernel_info(path)
    launcher = next(m for m in module.imports if m.kind == "cuda").get_function(name)
    pointers = [ctypes.c_void_p(t.data_ptr()) for t in (a, b, c)]
    dims = _launch_dims(tags)
    nop = tvm_ffi.get_global_func("testing.nop")
    stream = torch.cuda.current_stream().cuda_stream
    rows = {
        "jitflow kernel (shipped .so)": lambda: kernel(a, b, c),
        "torch.add(out=)": lambda: torch.add(a, b, out=c),
        "cuLaunchKernel (cuda.bindings)": _raw_launch(fatbin, name, [a, b, c], stream),
    }
    triton_add = _triton_add()
    if triton_add is not None:
        rows["Triton @jit kernel"] = lambda: triton_add[(1,)](a, b, c, 1024, BLOCK=1024)
    profile = {
        "a Python function": lambda: None,
        "tvm_ffi testing.nop()": lambda: nop(),
        "tvm_ffi testing.nop(a, b, c)": lambda: nop(a, b, c),
        "TVM's launcher alone": lambda: launcher(*pointers, *dims),
    }
    kernel(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    measured = per_call_us({**rows, **profile}, args.calls, args.rounds)
    fast = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    print(f"call overhead, vector add 1024, 3 torch CUDA tensors, on {torch.cuda.get_device_name()}: median of "
          f"{args.rounds} interleaved rounds of {args.calls} calls; torch {torch.__version__}, tvm-ffi "
          f"{tvm_ffi.__version__}, tvm-ffi's fast DLPack exchange path {'active' if fast else 'NOT active'}, "
          f"tvm imported: {'tvm' in sys.modules}")
    for row, us in measured.items():
        if row in rows:
            print(f"  {row:<34}{us:>8.2f} us/call")
    p = {k: measured[k] for k in profile}
    whole = measured["jitflow kernel (shipped .so)"]
    print("one call of the jitflow kernel, by difference:")
    for what, us in [("Python's call", p["a Python function"]),
                     ("tvm_ffi's call into C++", p["tvm_ffi testing.nop()"] - p["a Python function"]),
                     ("converting 3 torch tensors", p["tvm_ffi testing.nop(a, b, c)"] - p["tvm_ffi testing.nop()"]),
                     ("the host function (checks, lookup)", whole - p["tvm_ffi testing.nop(a, b, c)"]
                      - (p["TVM's launcher alone"] - p["tvm_ffi testing.nop()"])),
                     ("TVM's launcher and the driver", p["TVM's launcher alone"] - p["tvm_ffi testing.nop()"])]:
        print(f"  {what:<36}{us:>8.2f} us")
    launcher_us = p["TVM's launcher alone"]
    print(f"  {'all of it':<36}{whole:>8.2f} us (the launcher alone, called with 3 pointers and 2 launch "
          f"dimensions, costs {launcher_us:.2f} us)")


if __name__ == "__main__":
    main()
