"""Vector add on the CPU target: build (or hit the cache), check against numpy, report the timing.

Run it twice: the second run is a cache hit and does no lowering or compiling.
"""
import time

import numpy as np
import tvm
from tvm.script import tirx as T

import jitflow

N = 1024


@T.prim_func(s_tir=True)
def vecadd(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N):
        with T.sblock("C"):
            vi = T.axis.spatial(N, i)
            C[vi] = A[vi] + B[vi]


def main() -> None:
    exe = jitflow.compile(vecadd, "c")
    start = time.perf_counter()
    f = exe["main"]
    elapsed = time.perf_counter() - start
    a = np.random.rand(N).astype("float32")
    b = np.random.rand(N).astype("float32")
    c = tvm.runtime.tensor(np.zeros(N, "float32"))
    f(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    ok = np.allclose(c.numpy(), a + b)
    info = exe.build_info
    kind = "cache hit" if info.outcome == "hit" else "built (cache miss)"
    print(f"vecadd on the CPU: {kind} in {elapsed * 1000:.1f} ms, key {exe.key[:12]}")
    if info.outcome == "built":
        stages = dict(info.stages, load=elapsed - info.total)   # they add up to the time above
        print("  stages: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in stages.items()))
    print(f"  result {'matches' if ok else 'DOES NOT match'} numpy")
    print(f"  library: {info.library}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
