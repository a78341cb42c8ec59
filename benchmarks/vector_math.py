"""The C host's vector math and vector widths, measured: accuracy sweeps of jitflow's float32 math
(jitflow/builder/host_c/mathlib.py) against libm, and CPU kernels against TVM's LLVM host.

    python benchmarks/vector_math.py --sweep 4000000             # max ulp per function: scalar, vector, libm
    python benchmarks/vector_math.py --kernels --runs 20          # kernels: jitflow "c" against tvm llvm
    python benchmarks/vector_math.py --kernels --levels baseline,x86-64-v3 --threads 1
    python benchmarks/vector_math.py --export out --levels baseline,x86-64-v3,x86-64-v4   # build here,
    python benchmarks/vector_math.py --run out --runs 20                                # time elsewhere

Accuracy: every function on N random float32 bit patterns plus N inputs from its domain plus every
pair of special values, against numpy in float64 (ulp of the float32 result); libm is the C library's
float function called the same way (what TVM's LLVM host calls per lane). Kernels: each is built by
jitflow (`cpu_level`) and by `tvm.compile(target="llvm")` at the matching CPU (`mcpu` haswell for
x86-64-v3, skylake-avx512 for x86-64-v4), run on the same inputs in one process with
TVM_NUM_THREADS threads, results compared, then timed interleaved; the minimum of `--runs` is kept.
"""
from __future__ import annotations

import argparse
import ctypes
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LLVM_CPU = {"baseline": None, "x86-64-v2": "nehalem", "x86-64-v3": "haswell", "x86-64-v4": "skylake-avx512"}
ZIG_CPU = {"baseline": None, "x86-64-v2": "x86_64_v2", "x86-64-v3": "x86_64_v3", "x86-64-v4": "x86_64_v4"}
TWO = {"powf", "atan2f", "hypotf", "nextafterf", "copysignf"}


# -- accuracy ---------------------------------------------------------------------------------------

def _library(level: str, folder: Path) -> ctypes.CDLL:
    """mathlib's functions in loops: s_<f> (scalar form), v_<f> (8-lane form), l_<f> (libm)."""
    from jitflow.builder.host_c import mathlib, prelude
    from jitflow.toolchain.zig_cc import zig
    from jitflow.toolchain.zig_cc.zig_wheel import zig_binary

    calls = []
    for name in mathlib.PUBLIC:
        args, vargs = ("x[i], y[i]", "*(float8*)(x + i), *(float8*)(y + i)") if name in TWO \
            else ("x[i]", "*(float8*)(x + i)")
        head = "(const float* restrict x, const float* restrict y, float* restrict o, int n)"
        calls += [f"void s_{name}{head} {{ for (int i = 0; i < n; ++i) o[i] = jitflow_{name}({args}); }}",
                  f"void v_{name}{head} {{ for (int i = 0; i < n; i += 8) *(float8*)(o + i) = jitflow_{name}_x8({vargs}); }}",
                  f"void l_{name}{head} {{ for (int i = 0; i < n; ++i) o[i] = {name}({args}); }}"]
    body = "\n".join(calls)
    math_c = mathlib.definitions(body)
    text = "\n".join(["#define _GNU_SOURCE", "#include <stdint.h>", "#include <math.h>",
                      prelude.vector_types(body, math_c, "float8 double8 int64_t8 int32_t8"), math_c, body])
    (folder / "m.c").write_text(text)
    cpu = ZIG_CPU[level]
    subprocess.run([zig_binary(), "cc", "-shared", *zig.flags("x86_64-linux-gnu", folder, cpu), "m.c", "-o", "m.so",
                    "-lm"], cwd=folder, check=True)
    return ctypes.CDLL(str(folder / "m.so"))


def _ulp(ref: np.ndarray) -> np.ndarray:
    a = np.abs(ref)
    return np.exp2(np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -126) - 23)


def _errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """ulp error of each float32 result against a float64 reference (inf where nan-ness or infinity differs)."""
    ref = np.where(np.abs(ref) > np.finfo(np.float32).max * (1 + 2.0 ** -25), np.copysign(np.inf, ref), ref)
    g = got.astype(np.float64)
    exact = (np.isnan(g) & np.isnan(ref)) | (np.isinf(ref) & (g == ref))
    wrong = (np.isnan(g) != np.isnan(ref)) | ((np.isinf(ref) | np.isinf(g)) & ~exact)
    with np.errstate(all="ignore"):
        e = np.where(exact, 0.0, np.abs(g - ref) / _ulp(ref))
    return np.where(wrong, np.inf, e)


def _reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d, e = x.astype(np.float64), y.astype(np.float64)
    table = {"expf": np.exp, "exp2f": np.exp2, "exp10f": lambda v: np.power(10.0, v), "logf": np.log,
             "log2f": np.log2, "log10f": np.log10, "log1pf": np.log1p, "tanhf": np.tanh, "sinhf": np.sinh,
             "coshf": np.cosh, "atanf": np.arctan, "asinf": np.arcsin, "acosf": np.arccos, "asinhf": np.arcsinh,
             "acoshf": np.arccosh, "atanhf": np.arctanh, "sinf": np.sin, "cosf": np.cos, "tanf": np.tan,
             "truncf": np.trunc, "floorf": np.floor, "ceilf": np.ceil, "nearbyintf": np.rint, "sqrtf": np.sqrt,
             "fabsf": np.abs}
    with np.errstate(all="ignore"):
        if name == "erff":
            return np.frompyfunc(math.erf, 1, 1)(d).astype(np.float64)
        if name == "nextafterf":
            return np.nextafter(x, y).astype(np.float64)
        if name in TWO:
            return {"powf": np.power, "atan2f": np.arctan2, "hypotf": np.hypot, "copysignf": np.copysign}[name](d, e)
        return table[name](d)


_DOMAINS = {"expf": (-110, 90), "exp2f": (-160, 130), "exp10f": (-50, 40), "tanhf": (-12, 12), "sinhf": (-92, 92),
            "coshf": (-92, 92), "erff": (-5, 5), "sinf": (-6e5, 6e5), "cosf": (-6e5, 6e5), "tanf": (-6e5, 6e5),
            "asinf": (-1, 1), "acosf": (-1, 1), "atanhf": (-1, 1), "log1pf": (-1, 10), "powf": (0, 10)}
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45, 1e-40, 3.4e38, -3.4e38, 0.5,
                      2.0, 88.73, 88.72, -103.98, -87.3, 1e30, -1e30, 3.0, -3.0, 0.1], np.float32)


def sweep(count: int, level: str) -> None:
    from jitflow.builder.host_c import mathlib

    with tempfile.TemporaryDirectory() as tmp:
        lib = _library(level, Path(tmp))
        pointer = ctypes.POINTER(ctypes.c_float)

        def run(kind: str, name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
            out = np.zeros_like(x)
            getattr(lib, f"{kind}_{name}")(x.ctypes.data_as(pointer), y.ctypes.data_as(pointer),
                                           out.ctypes.data_as(pointer), ctypes.c_int(len(x)))
            return out

        rng = np.random.default_rng(0)
        print(f"max ulp error at {level}, {count} random bit patterns + {count} in the domain + special pairs")
        print(f"{'function':12s} {'scalar':>8s} {'vector':>8s} {'libm':>8s}")
        for name in mathlib.PUBLIC:
            bits = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32).view(np.float32)
            lo, hi = _DOMAINS.get(name, (-1e4, 1e4))
            with np.errstate(invalid="ignore"):
                x = np.concatenate([np.repeat(_SPECIALS, len(_SPECIALS)), bits, rng.uniform(lo, hi, count)])
                y = np.concatenate([np.tile(_SPECIALS, len(_SPECIALS)), bits[::-1], rng.uniform(-30, 30, count)])
            x, y = x[: len(x) // 8 * 8].astype(np.float32), y[: len(x) // 8 * 8].astype(np.float32)
            ref = _reference(name, x, y)
            errors = [_errors(run(k, name, x, y), ref) for k in "svl"]
            print(f"{name:12s} " + " ".join(f"{float(np.max(e)):8.4f}" for e in errors))
            if name in ("sinf", "cosf", "tanf"):          # libm computes the rest: |x| >= 2^19 falls back to it
                near = np.abs(x) < 2.0 ** 19
                print(f"{'  |x| < 2^19':12s} " + " ".join(f"{float(np.max(e[near])):8.4f}" for e in errors))


# -- kernels ----------------------------------------------------------------------------------------

def _kernels(size: int) -> dict:
    import tvm
    from tvm import te

    def vectorized(sch, block: str, lanes: int = 8, parallel: bool = False) -> None:
        loops = sch.get_loops(sch.get_sblock(block))
        _, inner = sch.split(loops[-1], [None, lanes])
        sch.vectorize(inner)
        if parallel:
            sch.parallel(loops[0])

    out = {}
    n = 4 * 1024 * 1024
    A = te.placeholder((64, n // 64), "float32", name="A")
    B = te.compute(A.shape, lambda i, j: te.sqrt(A[i, j] * A[i, j] + 1) * te.exp(A[i, j] / 1000), name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
    vectorized(sch, "B", parallel=True)
    out["elementwise sqrt*exp 4M"] = (sch.mod, [A.shape], [B.shape])

    m = size
    A = te.placeholder((m, m), "float32", name="A")
    W = te.placeholder((m, m), "float32", name="W")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((m, m), lambda i, j: te.sum(A[i, k] * W[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, W, C]))
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(i, jo, kk, ji)
    sch.parallel(i)
    sch.vectorize(ji)
    out[f"matmul {m}^3"] = (sch.mod, [A.shape, W.shape], [C.shape])

    rows, cols = 1024, 1024
    X = te.placeholder((rows, cols), "float32", name="X")
    r = te.reduce_axis((0, cols), name="r")
    mx = te.compute((rows,), lambda i: te.max(X[i, r], axis=r), name="mx")
    ex = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="ex")
    r2 = te.reduce_axis((0, cols), name="r2")
    sm = te.compute((rows,), lambda i: te.sum(ex[i, r2], axis=r2), name="sm")
    Y = te.compute((rows, cols), lambda i, j: ex[i, j] / sm[i], name="Y")
    sch = tvm.s_tir.Schedule(te.create_prim_func([X, Y]))
    vectorized(sch, "ex")
    vectorized(sch, "Y")
    out["softmax 1024x1024"] = (sch.mod, [X.shape], [Y.shape])

    X = te.placeholder((rows, cols), "float32", name="X")
    G = te.compute(X.shape, lambda i, j: X[i, j] * 0.5 * (1 + te.erf(X[i, j] * 0.7071067811865476)), name="G")
    T_ = te.compute(X.shape, lambda i, j: te.tanh(G[i, j]) + te.log(te.abs(G[i, j]) + 1), name="T")
    sch = tvm.s_tir.Schedule(te.create_prim_func([X, T_]))
    vectorized(sch, "G")
    vectorized(sch, "T")
    out["gelu(erf) + tanh + log 1M"] = (sch.mod, [X.shape], [T_.shape])

    X = te.placeholder((rows, cols), "float32", name="X")
    r = te.reduce_axis((0, cols), name="r")
    S = te.compute((rows,), lambda i: te.sum(X[i, r] * X[i, r], axis=r), name="S")
    sch = tvm.s_tir.Schedule(te.create_prim_func([X, S]))
    out["row sum of squares 1024x1024"] = (sch.mod, [X.shape], [S.shape])
    return out


def kernels(levels: list[str], runs: int, size: int) -> None:
    import tvm

    import jitflow

    print(f"kernels, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', 'unset')}, min of {runs} runs "
          "(jitflow 'c' / tvm llvm)")
    ratios = {}
    for level in levels:
        for name, (mod, inputs, outputs) in _kernels(size).items():
            exe = jitflow.compile(mod, "c", cpu_level=None if level == "baseline" else level)
            target = {"kind": "llvm", **({"mcpu": LLVM_CPU[level]} if LLVM_CPU[level] else {})}
            llvm = tvm.compile(mod, target=target)["main"]
            ours = exe.jit()["main"]
            rng = np.random.default_rng(0)
            args = [tvm.runtime.tensor(rng.uniform(-2, 2, [int(d) for d in s]).astype("float32")) for s in inputs]
            outs = [[tvm.runtime.tensor(np.zeros([int(d) for d in s], "float32")) for s in outputs] for _ in "ab"]
            ours(*args, *outs[0])
            llvm(*args, *outs[1])
            for a, b in zip(*outs):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)
            best = [math.inf, math.inf]
            for _ in range(runs):
                for n, f in enumerate((ours, llvm)):
                    start = time.perf_counter()
                    f(*args, *outs[n])
                    best[n] = min(best[n], time.perf_counter() - start)
            ratios[level, name] = best[0] / best[1]
            print(f"{level:10s} {name:32s} jitflow {best[0] * 1e3:8.2f} ms  llvm {best[1] * 1e3:8.2f} ms  "
                  f"ratio {best[0] / best[1]:.2f}")
    for level in levels:
        values = [v for (lv, _), v in ratios.items() if lv == level]
        print(f"{level}: geometric mean {math.exp(sum(map(math.log, values)) / len(values)):.2f}")


def export(folder: Path, levels: list[str], size: int) -> None:
    """Each kernel's two libraries (jitflow's, TVM llvm's) per level into `folder`, with their shapes,
    to be timed with --run on a machine that has only the TVM runtime."""
    import json

    import tvm

    import jitflow

    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for level in levels:
        for n, (name, (mod, inputs, outputs)) in enumerate(_kernels(size).items()):
            stem = f"{level}_{n}"
            jitflow.compile(mod, "c", cpu_level=None if level == "baseline" else level).export_library(
                folder / f"{stem}_jitflow.so")
            target = {"kind": "llvm", **({"mcpu": LLVM_CPU[level]} if LLVM_CPU[level] else {})}
            tvm.compile(mod, target=target).export_library(str(folder / f"{stem}_llvm.so"))
            index.append({"level": level, "name": name, "stem": stem, "inputs": [[int(d) for d in s] for s in inputs],
                          "outputs": [[int(d) for d in s] for s in outputs]})
    (folder / "index.json").write_text(json.dumps(index, indent=1))
    for level in levels:                     # the math functions alone, for --run's per-function table
        if level in ZIG_CPU:
            with tempfile.TemporaryDirectory() as tmp:
                _library(level, Path(tmp))
                (folder / f"math_{level}.so").write_bytes((Path(tmp) / "m.so").read_bytes())
    print(f"wrote {len(index)} kernel pairs to {folder}")


def run_exported(folder: Path, runs: int) -> None:
    """Time what --export wrote (TVM's runtime is enough), and the math functions one by one."""
    import json

    import tvm

    flags = set(Path("/proc/cpuinfo").read_text().split("flags", 2)[1].split("\n")[0].split())
    from jitflow.targets import cpu_level

    runs_here = {"baseline"} | {n for n, (_, needs) in cpu_level.LEVELS[cpu_level.X86].items() if set(needs) <= flags}
    print(f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}, levels this CPU runs: {sorted(runs_here)}")
    ratios: dict[str, list[float]] = {}
    for item in json.loads((folder / "index.json").read_text()):
        if item["level"] not in runs_here:
            continue
        ours = tvm.runtime.load_module(str(folder / f"{item['stem']}_jitflow.so"))["main"]
        llvm = tvm.runtime.load_module(str(folder / f"{item['stem']}_llvm.so"))["main"]
        rng = np.random.default_rng(0)
        args = [tvm.runtime.tensor(rng.uniform(-2, 2, s).astype("float32")) for s in item["inputs"]]
        outs = [[tvm.runtime.tensor(np.zeros(s, "float32")) for s in item["outputs"]] for _ in "ab"]
        ours(*args, *outs[0])
        llvm(*args, *outs[1])
        for a, b in zip(*outs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)
        best = [math.inf, math.inf]
        for _ in range(runs):
            for n, f in enumerate((ours, llvm)):
                start = time.perf_counter()
                f(*args, *outs[n])
                best[n] = min(best[n], time.perf_counter() - start)
        ratios.setdefault(item["level"], []).append(best[0] / best[1])
        print(f"{item['level']:10s} {item['name']:32s} jitflow {best[0] * 1e3:8.2f} ms  llvm {best[1] * 1e3:8.2f} ms  "
              f"ratio {best[0] / best[1]:.2f}")
    for level, values in ratios.items():
        print(f"{level}: geometric mean {math.exp(sum(map(math.log, values)) / len(values)):.2f}")
    pointer = ctypes.POINTER(ctypes.c_float)
    for lib_path in sorted(folder.glob("math_*.so")):
        level = lib_path.stem[len("math_"):]
        if level not in runs_here:
            continue
        lib = ctypes.CDLL(str(lib_path))
        from jitflow.builder.host_c import mathlib

        rng = np.random.default_rng(0)
        x = rng.uniform(-10, 10, 1 << 22).astype(np.float32)
        y = rng.uniform(0.5, 2, 1 << 22).astype(np.float32)
        print(f"math at {level}, 4M floats, ms (min of {runs}): scalar form in a loop, vector form, libm")
        for name in mathlib.PUBLIC:
            xx = np.abs(x) + 0.01 if name in ("logf", "log2f", "log10f", "powf", "acoshf") \
                else x / 11 if name in ("asinf", "acosf", "atanhf") else x
            out = np.zeros_like(x)
            t = []
            for kind in "svl":
                f = getattr(lib, f"{kind}_{name}")
                best = math.inf
                for _ in range(runs):
                    start = time.perf_counter()
                    f(xx.ctypes.data_as(pointer), y.ctypes.data_as(pointer), out.ctypes.data_as(pointer),
                      ctypes.c_int(len(x)))
                    best = min(best, time.perf_counter() - start)
                t.append(best * 1e3)
            print(f"  {name:11s} {t[0]:8.2f} {t[1]:8.2f} {t[2]:8.2f}   libm / vector {t[2] / t[1]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", type=int, default=0, metavar="N", help="accuracy sweep with N inputs per set")
    parser.add_argument("--kernels", action="store_true", help="time the kernels against TVM's LLVM host")
    parser.add_argument("--levels", default="baseline,x86-64-v3", help="CPU levels, comma-separated")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per kernel (the minimum is kept)")
    parser.add_argument("--threads", type=int, default=1, help="TVM_NUM_THREADS for the kernels")
    parser.add_argument("--matmul", type=int, default=1024, help="the matmul's size")
    parser.add_argument("--export", type=Path, metavar="DIR", help="write the kernels' libraries to DIR")
    parser.add_argument("--run", type=Path, metavar="DIR", help="time the libraries --export wrote to DIR")
    args = parser.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    levels = args.levels.split(",")
    if args.export:
        return export(args.export, levels, args.matmul)
    if args.run:
        return run_exported(args.run, args.runs)
    if args.sweep:
        for level in levels:
            sweep(args.sweep, level)
    if args.kernels or not args.sweep:
        kernels(levels, args.runs, args.matmul)


if __name__ == "__main__":
    main()
