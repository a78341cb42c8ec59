"""Loading a shipped library in a fresh process, against the floor, in the same run.

    python benchmarks/load_time.py [LIBRARY.so ...] [--runs 10] [--torch] [--input 1,3,224,224]

Without a library it builds a CPU vector add and resnet18 (benchmarks/nn_models.py) into a temporary
folder first (that needs TVM's compiler; loading does not). Every figure is the median over fresh
processes, the paths interleaved.

- A library of kernels: `import jitflow` + `jitflow.load(path)` + the first call of `main(a, b, c)`
  (1024 floats; numpy arrays, torch CUDA tensors for device code) against the floor: `import tvm_ffi`
  + `ctypes.CDLL(libtvm_runtime.so, RTLD_GLOBAL)` (and the CUDA backend for device code) +
  `tvm_ffi.load_module(path)` + the same call. Both windows include their imports. With --torch (always
  for device code) torch is imported and its CUDA context made before either window starts, as in a
  torch service.
- A Relax model: `jitflow.load_vm(path)` to a callable VM, digest check included, against the floor:
  `dlopen` of the library plus one read of its bytes (its weights). Apart, in the same processes: what
  TVM's own loader adds after dlopen (`tvm_ffi.load_module`: it copies the VM executable, weights
  included, out of the mapped library), the digest check alone, and the first call on each path. The
  ratio is given with TVM's part and without it. The imports are outside these windows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]
import fresh_process  # noqa: E402

PRELUDE = """
import json, sys, time, os, ctypes
sys.path[:0] = {paths!r}
torch = None
if {torch!r}:
    import torch
    torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
"""

KERNEL = PRELUDE + """
def args(np):
    if torch is not None and {cuda!r}:
        return [torch.rand(1024, device="cuda") for _ in range(3)]
    return [np.ones(1024, "float32"), np.ones(1024, "float32"), np.zeros(1024, "float32")]
def sync():
    if torch is not None and {cuda!r}:
        torch.cuda.synchronize()
start = time.perf_counter()
if {mode!r} == "jitflow":
    import jitflow, numpy as np
    f = jitflow.load({path!r})["main"]
else:
    import tvm_ffi, numpy as np
    for lib in {floor_libs!r}:
        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    f = tvm_ffi.load_module({path!r})["main"]
a = args(np)
f(*a)
sync()
print(json.dumps({{"window": time.perf_counter() - start, "tvm": "tvm" in sys.modules}}))
"""

MODEL = PRELUDE + """
import numpy as np, tvm_ffi
for lib in {floor_libs!r}:
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
device = "cuda" if {cuda!r} else "cpu"
x = np.random.default_rng(0).standard_normal({shape!r}).astype("float32")
if torch is not None and {cuda!r}:
    x = torch.from_numpy(x).cuda()
def sync():
    if torch is not None and {cuda!r}:
        torch.cuda.synchronize()
out = {{}}
if {mode!r} == "jitflow":
    import jitflow
    get = tvm_ffi.get_global_func
    def timed_get(name, *args, **kwargs):      # times TVM's loader (dlopen + its reading) inside load_vm
        f = get(name, *args, **kwargs)
        if name != "ffi.Module.load_from_file.so":
            return f
        def timed(*a):
            t = time.perf_counter(); m = f(*a); out["tvm_inside"] = time.perf_counter() - t
            return m
        return timed
    tvm_ffi.get_global_func = timed_get
    __import__("gc").collect()
    start = time.perf_counter()
    vm = jitflow.load_vm({path!r}, device)
    out["load"] = time.perf_counter() - start
    fn = vm[{function!r}]
    from jitflow.runtime import library_check
    fd = os.open({path!r}, os.O_RDONLY)
    t = time.perf_counter(); library_check.check(fd); out["digest"] = time.perf_counter() - t
else:
    __import__("gc").collect()
    before = rss()
    start = time.perf_counter()
    handle = ctypes.CDLL({path!r})
    out["dlopen"] = time.perf_counter() - start
    if {mode!r} == "floor":
        with open({path!r}, "rb") as f:
            data = bytearray(os.fstat(f.fileno()).st_size)
            f.readinto(data)
        out["load"] = time.perf_counter() - start
    else:                                              # TVM's own loader, after the dlopen above
        t = time.perf_counter()
        module = tvm_ffi.load_module({path!r})
        out["tvm_after_dlopen"] = time.perf_counter() - t
        out["tvm_rss"] = rss() - before
        vm = module["vm_load_executable"](); vm["vm_initialization"](*([2, 0, 2, 1, 0, 2] if {cuda!r} else [1, 0, 2]))
        fn = vm[{function!r}]
if {mode!r} != "floor":
    t = time.perf_counter(); fn(x); sync(); out["first_call"] = time.perf_counter() - t
out["tvm"] = "tvm" in sys.modules
print(json.dumps(out))
"""


def _facts(path: Path) -> tuple[bool, str | None]:
    """(whether the library holds device code, its first VM function or None for kernels)."""
    from jitflow.formats import library_blob, vm_program
    from jitflow.runtime import library_check

    fd = os.open(path, os.O_RDONLY)
    try:
        cuda = "cuda" in library_check.check(fd).needs
    finally:
        os.close(fd)
    vm = library_blob.payloads_of(path, vm_program.KIND)
    names = [f.name for f in vm_program.function_table(vm[0]) if f.kind == "vm"] if vm else None
    return cuda, (next((n for n in names if n in ("main", "forward")), names[0]) if names else None)


def _floor_libs(cuda: bool) -> list[str]:
    """The libraries the floor loads itself: TVM's runtime, and for device code its CUDA backend (after
    the CUDA runtime of NVIDIA's wheels where the backend finds none on its own)."""
    import ctypes

    import tvm_ffi  # noqa: F401  (libtvm_ffi.so, which TVM's runtime links against, loaded first)

    from jitflow.runtime import tvm_runtime

    folder = tvm_runtime.lib_folder()
    libs = [str(folder / tvm_runtime.RUNTIME)]
    if not cuda:
        return libs
    ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
    for cudart in [None, *tvm_runtime.cudart_candidates()]:
        try:
            if cudart:
                ctypes.CDLL(cudart, mode=ctypes.RTLD_GLOBAL)
            ctypes.CDLL(str(folder / tvm_runtime.CUDA), mode=ctypes.RTLD_GLOBAL)
            return [*([cudart] if cudart else []), *libs, str(folder / tvm_runtime.CUDA)]
        except OSError:
            continue
    raise SystemExit(f"TVM's CUDA backend does not load here ({folder / tvm_runtime.CUDA})")


def _runs(code: str, modes: list[str], runs: int, **fields) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(runs):
        for mode in modes:
            text = code.format(paths=[str(ROOT)], mode=mode, **fields)
            rows[mode].append(fresh_process.run(text, dict(os.environ), mode))
    return rows


def _median(rows: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in rows)


def kernel(path: Path, cuda: bool, runs: int, torch: bool) -> None:
    rows = _runs(KERNEL, ["jitflow", "floor"], runs, path=str(path), cuda=cuda, torch=torch or cuda,
                 floor_libs=_floor_libs(cuda))
    ours, floor = _median(rows["jitflow"], "window"), _median(rows["floor"], "window")
    where = " (torch imported and its CUDA context made first)" if torch or cuda else ""
    print(f"load + first call of {path.name}{where}, median of {runs} fresh processes:")
    print(f"  jitflow: import jitflow + jitflow.load + first call      {ours * 1e3:8.1f} ms"
          f"  (tvm imported: {any(r['tvm'] for r in rows['jitflow'])})")
    print(f"  floor:   import tvm_ffi + CDLL + tvm_ffi.load_module + call {floor * 1e3:6.1f} ms")
    print(f"  ratio {ours / floor:.2f}x (goal 1.2x)")


def model(path: Path, cuda: bool, runs: int, torch: bool, shape: tuple[int, ...], function: str) -> None:
    rows = _runs(MODEL, ["jitflow", "floor", "tvm"], runs, path=str(path), cuda=cuda, torch=torch or cuda,
                 floor_libs=_floor_libs(cuda), shape=shape, function=function)
    ours, floor = _median(rows["jitflow"], "load"), _median(rows["floor"], "load")
    own = statistics.median(r["load"] - r["tvm_inside"] for r in rows["jitflow"])   # per process, then median
    digest, dlopen = _median(rows["jitflow"], "digest"), _median(rows["tvm"], "dlopen")
    tvm_part, rss = _median(rows["tvm"], "tvm_after_dlopen"), _median(rows["tvm"], "tvm_rss")
    size = path.stat().st_size
    print(f"load_vm of {path.name} ({size / 2**20:.1f} MiB), median of {runs} fresh processes (imports outside):")
    print(f"  jitflow.load_vm to a callable VM   {ours * 1e3:7.1f} ms  (jitflow's own part {own * 1e3:.1f} ms, the "
          f"digest check alone {digest * 1e3:.1f} ms; tvm imported: {any(r['tvm'] for r in rows['jitflow'])})")
    print(f"  floor: dlopen + one read of it      {floor * 1e3:7.1f} ms  (dlopen alone {dlopen * 1e3:.1f} ms)")
    print(f"  TVM's loader after dlopen           {tvm_part * 1e3:7.1f} ms  (its resident memory grows by "
          f"{rss / 2**20:.0f} MiB: the VM executable and its weights copied out of the mapped library)")
    print(f"  ratio {ours / floor:.2f}x with TVM's loader, {(own + dlopen) / floor:.2f}x without it: jitflow's own "
          f"part plus the dlopen (goal 2x)")
    print(f"  first call: jitflow {_median(rows['jitflow'], 'first_call') * 1e3:.1f} ms, "
          f"tvm_ffi directly {_median(rows['tvm'], 'first_call') * 1e3:.1f} ms")


def _build(folder: Path) -> list[Path]:
    import kernels
    import nn_models

    import jitflow

    out = [jitflow.compile(kernels.vecadd(), "c").export_library(folder / "vecadd.so"),
           jitflow.compile(nn_models.resnet18().mod, "c").export_library(folder / "resnet18.so")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--torch", action="store_true", help="import torch and make its CUDA context first")
    parser.add_argument("--input", default="1,3,224,224", help="the input shape of a model's first call")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        libraries = args.libraries or _build(Path(tmp))
        for path in libraries:
            cuda, function = _facts(path.resolve())
            if function is None:
                kernel(path.resolve(), cuda, args.runs, args.torch)
            else:
                model(path.resolve(), cuda, max(1, args.runs // 2), args.torch,
                      tuple(int(d) for d in args.input.split(",")), function)


if __name__ == "__main__":
    main()
