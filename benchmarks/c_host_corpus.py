"""Which host builds what: jitflow's C host, TVM's C host (exported with gcc), TVM's LLVM host.

    python benchmarks/c_host_corpus.py [--image 224] [--runs 1] [--no-gcc] [--skip-timing]

Part 1, the corpus: every kernel of tests/c_host_kernels.py (one per construct TVM's C printer
gets wrong, each in a module of its own) and two models (a transformer layer with a -inf mask, a
top-k head), built by each host and checked against numpy. A case "builds" when the host produces
a loadable library, and "matches" when its outputs equal numpy's within the case's tolerance.

Part 2, run time: resnet18 and mobilenet_v2 (benchmarks/nn_models.py, 1x3ximagexi), each host in a
fresh process: build time, the first inference, and the second. Outputs are checked against the
LLVM build's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

import fresh_process  # noqa: E402

HOSTS = ("jitflow C", "TVM C (gcc)", "TVM LLVM")


def _build(host: str, mod, folder: Path):
    """A callable runtime module of `mod` from one host (raises when the host cannot build it)."""
    import tvm

    import jitflow

    if host == "jitflow C":
        return jitflow.compile(mod, "c", cache=False).jit()
    if host == "TVM LLVM":
        return tvm.compile(mod, "llvm").mod
    path = folder / f"tvm_c_{len(list(folder.iterdir()))}.so"
    tvm.compile(mod, "c").export_library(str(path))      # TVM's default: the system compiler (gcc)
    return tvm.runtime.load_module(str(path))


def _short(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = next((ln for ln in lines if ": error:" in ln), None) or next(
        (ln for ln in lines if "Unresolved call" in ln or "Cannot convert" in ln or "Mismatch" in ln),
        lines[-1] if lines else type(exc).__name__)
    return text.split(": error: ")[-1][:110]


def _kernel_row(host: str, case, folder: Path) -> tuple[bool, bool, str]:
    import c_host_kernels as K
    import numpy as np

    try:
        lib = _build(host, K.module([case]), folder)
    except Exception as exc:  # noqa: BLE001 - a host that cannot build the case is the measurement
        return False, False, _short(exc)
    arrays = case.inputs(np.random.default_rng(0))
    try:
        got = K.call(lib[case.name], case, arrays)
        if case is K.RANDOM:
            return True, K.uniform_ok(got), ""
        K.check(case, arrays, got)
        return True, True, ""
    except Exception as exc:  # noqa: BLE001
        return True, False, _short(exc)


def _model_row(host: str, name: str, folder: Path) -> tuple[bool, bool, str]:
    import nn_models
    import numpy as np
    import tvm

    model = nn_models.transformer_layer() if name == "transformer_layer" else nn_models.topk_head()
    x = model.example_input(1)
    try:
        vm = tvm.relax.VirtualMachine(_build(host, model.mod, folder), tvm.cpu())
    except Exception as exc:  # noqa: BLE001
        return False, False, _short(exc)
    try:
        out = vm["forward"](tvm.runtime.tensor(x))
        if name == "transformer_layer":
            np.testing.assert_allclose(out.numpy(), nn_models.transformer_reference(model, x), rtol=1e-5, atol=1e-5)
        else:
            values, indices = nn_models.topk_reference(model, x)
            np.testing.assert_array_equal(out[1].numpy(), indices)
            np.testing.assert_allclose(out[0].numpy(), values, rtol=1e-5)
        return True, True, ""
    except Exception as exc:  # noqa: BLE001
        return True, False, _short(exc)


def corpus(gcc: bool) -> None:
    import c_host_kernels as K

    rows = [(group, case.name, case) for group, cases in K.GROUPS.items() for case in cases]
    rows.append(("packed", K.RANDOM.name, K.RANDOM))
    rows += [("models", name, None) for name in ("transformer_layer", "topk_head")]
    hosts = [h for h in HOSTS if gcc or h != "TVM C (gcc)"]
    results: dict[str, dict[str, list[tuple[bool, bool, str]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for group, name, case in rows:
            for host in hosts:
                row = _kernel_row(host, case, Path(tmp)) if case is not None else _model_row(host, name, Path(tmp))
                results.setdefault(group, {}).setdefault(host, []).append(row)
                if not row[1]:
                    print(f"  {name:<22} {host:<12} {'builds, no match' if row[0] else 'fails'}: {row[2]}",
                          file=sys.stderr)
    print("\n| class | cases | " + " | ".join(f"{h}: build / match" for h in hosts) + " |")
    print("|---|---|" + "---|" * len(hosts))
    totals = {h: [0, 0] for h in hosts}
    count = 0
    for group, by_host in results.items():
        n = len(next(iter(by_host.values())))
        count += n
        cells = []
        for host in hosts:
            built, matched = sum(r[0] for r in by_host[host]), sum(r[1] for r in by_host[host])
            totals[host][0] += built
            totals[host][1] += matched
            cells.append(f"{built} / {matched}")
        print(f"| {group} | {n} | " + " | ".join(cells) + " |")
    print(f"| all | {count} | " + " | ".join(f"{b} / {m}" for b, m in totals.values()) + " |")


CHILD = """
import json, sys, time
sys.path[:0] = {paths!r}
import numpy as np, tvm
import c_host_corpus, nn_models
model = getattr(nn_models, {model!r})(image={image})
x = tvm.runtime.tensor(model.example_input(0))
with __import__("tempfile").TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    lib = c_host_corpus._build({host!r}, model.mod, __import__("pathlib").Path(tmp))
    vm = tvm.relax.VirtualMachine(lib, tvm.cpu())
    t1 = time.perf_counter()
    out = vm["forward"](x).numpy()
    t2 = time.perf_counter()
    vm["forward"](x)
    t3 = time.perf_counter()
np.save({out_path!r}, out)
print(json.dumps({{"build": t1 - t0, "first": t2 - t1, "second": t3 - t2}}))
"""


def timing(image: int, runs: int, gcc: bool) -> None:
    import numpy as np

    hosts = [h for h in HOSTS if gcc or h != "TVM C (gcc)"]
    env = dict(os.environ, JITFLOW_PROGRESS="0")
    print(f"\n| model (1x3x{image}x{image}) | host | build s | first inference s | second inference s "
          "| max abs diff to LLVM |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("resnet18", "mobilenet_v2"):
            outs, figures = {}, {}
            for host in hosts:
                out_path = str(Path(tmp) / f"{model}_{host.split()[1]}.npy")
                code = CHILD.format(paths=sys.path[:3], model=model, image=image, host=host, out_path=out_path)
                try:
                    samples = [fresh_process.run(code, env, f"{model} {host}") for _ in range(runs)]
                except SystemExit as exc:
                    figures[host] = None
                    print(f"  {model} {host} failed: {str(exc).strip().splitlines()[-1][:160]}", file=sys.stderr)
                    continue
                figures[host] = {k: statistics.median(s[k] for s in samples) for k in ("build", "first", "second")}
                outs[host] = np.load(out_path)
            for host in hosts:
                f = figures[host]
                if f is None:
                    print(f"| {model} | {host} | fails | | | |")
                    continue
                diff = float(np.abs(outs[host] - outs["TVM LLVM"]).max()) if "TVM LLVM" in outs else float("nan")
                print(f"| {model} | {host} | {f['build']:.2f} | {f['first']:.3f} | {f['second']:.3f} | {diff:.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", type=int, default=224, help="image size of the run-time models")
    parser.add_argument("--runs", type=int, default=1, help="fresh processes per timing (median)")
    parser.add_argument("--no-gcc", dest="gcc", action="store_false", help="leave out TVM's C host (gcc)")
    parser.add_argument("--skip-timing", action="store_true", help="only the corpus table")
    args = parser.parse_args()
    os.environ.setdefault("JITFLOW_PROGRESS", "0")
    corpus(args.gcc)
    if not args.skip_timing:
        timing(args.image, args.runs, args.gcc)
    print(json.dumps({"machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"}))


if __name__ == "__main__":
    main()
