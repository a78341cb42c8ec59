"""Vector add on CUDA: build for two archs (no GPU needed), export the library, run it where a GPU is.

    python examples/vecadd_cuda.py [out.so]
"""
import sys

import numpy as np
import tvm
from tvm.script import tirx as T

import jitflow

N = 1 << 20


@T.prim_func(s_tir=True)
def vecadd(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N):
        with T.sblock("C"):
            vi = T.axis.spatial(N, i)
            C[vi] = A[vi] + B[vi]


def schedule() -> tvm.IRModule:
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": vecadd}))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx = sch.split(i, [None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "vecadd_cuda.so"
    exe = jitflow.compile(schedule(), "cuda", arch=["sm_80", "sm_90"])
    path = exe.export_library(out)
    print(f"{path}: {exe.build_info}")
    if jitflow.visible_gpu_arch() is None:
        print("no GPU here: copy the library to a GPU machine and run jitflow.load(path)['main'](a, b, c)")
        return
    dev = tvm.cuda(0)
    a = tvm.runtime.tensor(np.random.rand(N).astype("float32"), dev)
    b = tvm.runtime.tensor(np.random.rand(N).astype("float32"), dev)
    c = tvm.runtime.empty((N,), "float32", dev)
    jitflow.load(path)["main"](a, b, c)
    ok = np.allclose(c.numpy(), a.numpy() + b.numpy())
    print(f"ran on the GPU: result {'matches' if ok else 'DOES NOT match'} numpy")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
