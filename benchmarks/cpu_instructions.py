"""Instructions per call of benchmarks/cpu_kernels.py's kernels, jitflow's C host against TVM's LLVM host,
counted by valgrind's callgrind: a figure that does not move with the load of a shared machine.

    python benchmarks/cpu_instructions.py --only NAME,... [--threads 1] [--calls 3] [--level x86-64]
                                          [--cache-sim] [--keep DIR]

What it measures: each selected kernel is built by jitflow (`jitflow.compile(mod, "c")`) and by
`tvm.compile(mod, target="llvm")` (exported with TVM's default linker), then called `--calls` times
in a fresh interpreter under `valgrind --tool=callgrind` that imports only tvm_ffi and TVM's runtime
(importing TVM's compiler under valgrind takes minutes). Only what runs inside the packed function
`__tvm_ffi_main` is counted (callgrind's --toggle-collect), in every thread: at one thread TVM's pool
runs the parallel lambda in the calling thread; at more, valgrind runs the threads one at a time, so
the count holds the pool's spinning (the launching thread's wait and the workers' yields), which is
where a launch or a barrier that waits longer shows up.

How to read it: instructions (Ir) per call of each build and the ratio jitflow / LLVM. Fewer
instructions is not faster time (a rolled loop against an unrolled one, a dependency chain, a
cache miss): read it beside `cpu_kernels.py`'s times, as the measure that noise does not blur.
`--cache-sim` adds callgrind's simulated first-level and last-level data misses.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENTRY = "__tvm_ffi_main"


def _runtime_library() -> str:
    """TVM's runtime library, found without importing TVM."""
    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("TVM is not installed in this interpreter")
    for folder in spec.submodule_search_locations:
        for candidate in (Path(folder) / "lib" / "libtvm_runtime.so", Path(folder) / "libtvm_runtime.so"):
            if candidate.exists():
                return str(candidate)
    raise SystemExit("libtvm_runtime.so not found beside the tvm package")


def child(library: str, inputs: str, calls: int) -> int:
    """Load the library through tvm_ffi (TVM's runtime loaded first, for its thread pool) and call it."""
    import ctypes

    import numpy as np
    import tvm_ffi

    ctypes.CDLL(_runtime_library(), ctypes.RTLD_GLOBAL)
    module = tvm_ffi.load_module(library)
    saved = json.loads(Path(inputs).read_text())
    arrays = np.load(saved["arrays"])
    args = [tvm_ffi.from_dlpack(np.ascontiguousarray(arrays[f"a{i}"])) if kind == "array" else value
            for i, (kind, value) in enumerate(saved["args"])]
    main = module["main"]
    for _ in range(calls):
        main(*args)
    return 0


def _inputs(kernel: Any, func: Any, folder: Path) -> Path:
    """The kernel's arguments (as cpu_timing.arguments makes them) written for the child."""
    import cpu_timing
    import numpy as np

    values = cpu_timing.arguments(func, kernel, np.random.default_rng(0))
    arrays = {f"a{i}": v for i, v in enumerate(values) if isinstance(v, np.ndarray)}
    np.savez(folder / "arrays.npz", **arrays)
    spec = {"arrays": str(folder / "arrays.npz"),
            "args": [["array", None] if isinstance(v, np.ndarray) else ["int", int(v)] for v in values]}
    path = folder / "inputs.json"
    path.write_text(json.dumps(spec))
    return path


_TOTALS = re.compile(r"^(?:totals|summary):\s+(.*)$", re.MULTILINE)
_EVENTS = re.compile(r"^events:\s+(.*)$", re.MULTILINE)


def count(library: Path, inputs: Path, calls: int, threads: int, cache_sim: bool, folder: Path) -> dict[str, float]:
    """Callgrind's counts inside the entry over `calls` calls, per call (Ir, and with the cache
    simulation D1mr + D1mw and DLmr + DLmw)."""
    out = folder / f"callgrind.{library.stem}.out"
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={ENTRY}",
               f"--callgrind-out-file={out}", *(["--cache-sim=yes"] if cache_sim else []),
               sys.executable, str(Path(__file__).resolve()), "--child", str(library), str(inputs), str(calls)]
    env = dict(os.environ, TVM_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"valgrind exited with {proc.returncode}: {proc.stderr[-2000:]}")
    text = out.read_text()
    names = _EVENTS.search(text).group(1).split()
    values = [int(v) for v in _TOTALS.findall(text)[-1].split()]
    totals = dict(zip(names, values + [0] * (len(names) - len(values))))
    result = {"Ir": totals["Ir"] / calls}
    if cache_sim:
        result["D1miss"] = (totals.get("D1mr", 0) + totals.get("D1mw", 0)) / calls
        result["LLmiss"] = (totals.get("DLmr", 0) + totals.get("DLmw", 0)) / calls
    return result


def measure(name: str, level: str | None, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One kernel's counts, both builds."""
    import cpu_corpus
    import tvm
    from cpu_schedules import llvm_target

    import jitflow

    groups = (name.split("/", 1)[0],)
    kernel = next(k for k in cpu_corpus.kernels(level, groups) if k.name == name)
    mod = kernel.make()
    here = folder / name.replace("/", "_")
    here.mkdir(parents=True, exist_ok=True)
    exe = jitflow.compile(mod, "c", cpu_level=level, name=f"cpu_instructions {name}")
    exe.build()
    libraries = {"jitflow": Path(exe.build_info.library),
                 "llvm": Path(tvm.compile(mod, target=tvm.target.Target(llvm_target(level)))
                              .export_library(str(here / "llvm.so")) or here / "llvm.so")}
    inputs = _inputs(kernel, mod["main"], here)
    row: dict[str, Any] = {"name": name}
    for side, library in libraries.items():
        row[side] = count(library, inputs, args.calls, args.threads, args.cache_sim, here)
    row["ratio"] = row["jitflow"]["Ir"] / row["llvm"]["Ir"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="kernel names (cpu_kernels.py --list), comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="TVM_NUM_THREADS of the counted process (default 1)")
    parser.add_argument("--calls", type=int, default=3, help="calls counted (default 3)")
    parser.add_argument("--level", default="x86-64", help="CPU level (default the baseline x86-64)")
    parser.add_argument("--cache-sim", action="store_true", help="also count simulated data cache misses")
    parser.add_argument("--keep", type=Path, help="keep libraries, inputs and callgrind files in this folder")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], int(args.child[2]))
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if not names:
        parser.error("--only: name the kernels to count (cpu_kernels.py --list shows them)")
    sys.path[:0] = [str(ROOT), str(HERE)]
    level = None if args.level == "x86-64" else args.level
    rows = []
    with tempfile.TemporaryDirectory(prefix="cpu-instructions-") as tmp:
        folder = args.keep or Path(tmp)
        print(f"instructions per call inside {ENTRY}, callgrind, TVM_NUM_THREADS={args.threads}, "
              f"{args.calls} calls, CPU level {args.level}")
        extra = "  jitflow D1/LL miss    llvm D1/LL miss" if args.cache_sim else ""
        print(f"{'kernel':<34} {'jitflow':>14} {'llvm':>14} {'ratio':>7}{extra}", flush=True)
        for name in names:
            try:
                row = measure(name, level, args, folder)
            except Exception as e:  # noqa: BLE001 - a row saying what failed
                print(f"{name:<34} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                continue
            rows.append(row)
            line = f"{name:<34} {row['jitflow']['Ir']:>14,.0f} {row['llvm']['Ir']:>14,.0f} {row['ratio']:>6.2f}x"
            if args.cache_sim:
                line += "".join(f"  {row[s]['D1miss']:>9,.0f}/{row[s]['LLmiss']:<9,.0f}" for s in ("jitflow", "llvm"))
            print(line, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
