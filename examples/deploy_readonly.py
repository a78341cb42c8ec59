"""Deploying without a compiler, on the CPU, in temporary folders: the three steps of docs/deploy.md.

1. CI (building allowed): run the workload with JITFLOW_RECORD, then pack what it recorded:
   `jitflow cache pack bundle.tar --manifest record.jsonl`.
2. The image: `jitflow cache unpack bundle.tar --cache-dir DIR` into the cache folder the service uses.
3. Serving: the workload again, in a fresh process, with JITFLOW_CACHE=readonly: every library is a
   cache hit, nothing is built or written, and a module the cache cannot serve is a CacheMissError
   that says why and what to do: printed whole below for a kernel that was never recorded, and for
   the recorded kernel under another cache salt (the error names the input that differs).

The workload is a kernel and a small Relax model; each step runs in a process of its own, as it
would on its own machine. Run: python examples/deploy_readonly.py
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

D_IN, HIDDEN, D_OUT = 16, 32, 8


def kernel(scale: float = 3.0):
    """C = A * scale + 1 over 1024 floats."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
        for i in range(1024):
            with T.sblock("C"):
                vi = T.axis.spatial(1024, i)
                C[vi] = A[vi] * T.float32(scale) + T.float32(1)

    return tvm.IRModule({"main": main})


def weights():
    rng = np.random.default_rng(0)
    return {"w1": (rng.standard_normal((D_IN, HIDDEN)) / 4).astype("float32"),
            "b1": rng.standard_normal(HIDDEN).astype("float32"),
            "w2": (rng.standard_normal((HIDDEN, D_OUT)) / 6).astype("float32"),
            "b2": rng.standard_normal(D_OUT).astype("float32")}


def model():
    """y = relu(x @ w1 + b1) @ w2 + b2, its weights bound into the module."""
    from tvm import relax
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class MLP:
        @R.function
        def main(x: R.Tensor((4, D_IN), "float32"), w1: R.Tensor((D_IN, HIDDEN), "float32"),
                 b1: R.Tensor((HIDDEN,), "float32"), w2: R.Tensor((HIDDEN, D_OUT), "float32"),
                 b2: R.Tensor((D_OUT,), "float32")) -> R.Tensor((4, D_OUT), "float32"):
            with R.dataflow():
                h = R.nn.relu(R.add(R.matmul(x, w1), b1))
                y = R.add(R.matmul(h, w2), b2)
                R.output(y)
            return y

    return relax.transform.BindParams("main", weights())(MLP)


def workload() -> None:
    """What the service does: run the kernel and the model, check them, and say how each was obtained."""
    import tvm

    import jitflow
    from jitflow.errors import CacheMissError

    exe = jitflow.compile(kernel(), "c", name="scale3")
    a = np.arange(1024, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(1024, "float32"))
    exe["main"](tvm.runtime.tensor(a), c)
    assert np.allclose(c.numpy(), a * 3 + 1)
    print(f"  kernel {exe.key[:12]}: {exe.build_info.outcome}")

    net = jitflow.compile(model(), "c", name="mlp")
    x = np.random.default_rng(1).standard_normal((4, D_IN)).astype("float32")
    y = net.vm("cpu")["main"](tvm.runtime.tensor(x)).numpy()
    w = weights()
    assert np.allclose(y, np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"], rtol=1e-5, atol=1e-5)
    print(f"  model  {net.key[:12]}: {net.build_info.outcome}")

    if os.environ.get("JITFLOW_CACHE") == "readonly":
        misses = {"a kernel that was not recorded": jitflow.compile(kernel(5.0), "c"),
                  "the recorded kernel under another cache salt": jitflow.compile(kernel(), "c", name="scale3",
                                                                                  cache_salt="v2")}
        for what, exe in misses.items():
            try:
                exe.jit()
            except CacheMissError as exc:
                print(f"  {what}: CacheMissError, kind {exc.kind}:")
                print(textwrap.fill(str(exc), 100, initial_indent="    ", subsequent_indent="    ",
                                    break_long_words=False, break_on_hyphens=False))


def step(title: str, command: list[str], env: dict[str, str]) -> str:
    print(title)
    proc = subprocess.run(command, env=dict(os.environ, **env), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def main() -> None:
    jitflow_cli = [sys.executable, "-m", "jitflow"]
    this = [sys.executable, str(Path(__file__).resolve()), "workload"]
    with tempfile.TemporaryDirectory() as tmp:
        ci_cache, image_cache = Path(tmp) / "ci-cache", Path(tmp) / "image" / "jitflow-cache"
        record, bundle = Path(tmp) / "record.jsonl", Path(tmp) / "bundle.tar"

        ci = {"JITFLOW_CACHE_DIR": str(ci_cache), "JITFLOW_CACHE": "1", "JITFLOW_RECORD": str(record)}
        print(step("1. CI: the workload with JITFLOW_RECORD (builds)", this, ci), end="")
        keys = [json.loads(line)["key"][:12] for line in record.read_text().splitlines()]
        print(f"  recorded {len(keys)} keys: {', '.join(keys)}")
        out = step("   jitflow cache pack bundle.tar --manifest record.jsonl",
                   [*jitflow_cli, "cache", "pack", str(bundle), "--manifest", str(record), "--cache-dir",
                    str(ci_cache)], {})
        print("  " + out.strip().replace(tmp, "<tmp>"))

        out = step("2. The image: jitflow cache unpack bundle.tar --cache-dir <image cache>",
                   [*jitflow_cli, "cache", "unpack", str(bundle), "--cache-dir", str(image_cache)], {})
        print("  " + out.strip().replace(tmp, "<tmp>"))

        serve = {"JITFLOW_CACHE_DIR": str(image_cache), "JITFLOW_CACHE": "readonly", "JITFLOW_RECORD": ""}
        print(step("3. Serving: the workload with JITFLOW_CACHE=readonly (no compiler runs)", this, serve), end="")


if __name__ == "__main__":
    if sys.argv[1:] == ["workload"]:
        workload()
    else:
        main()
