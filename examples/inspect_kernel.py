"""See what a CUDA build runs: the host code's kernel launches and device allocations, each kernel's
registers, and how a pass configuration changes the memory plan. No GPU is needed: the fatbin is
built by NVRTC from NVIDIA's pip wheels (pip install 'jitflow[cuda]').

    python examples/inspect_kernel.py
"""
import tvm
from tvm.script import tirx as T

import jitflow
from jitflow.errors import ToolMissingError
from jitflow.report import diff

N = 4096


@T.prim_func(s_tir=True)
def chain(A: T.Buffer((N,), "float32"), D: T.Buffer((N,), "float32")):
    B = T.sblock_alloc_buffer((N,), "float32")       # two intermediates in global memory
    C = T.sblock_alloc_buffer((N,), "float32")
    for i in range(N):
        with T.sblock("B"):
            vi = T.axis.spatial(N, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(N):
        with T.sblock("C"):
            vi = T.axis.spatial(N, i)
            C[vi] = B[vi] + T.float32(1)
    for i in range(N):
        with T.sblock("D"):
            vi = T.axis.spatial(N, i)
            D[vi] = C[vi] * C[vi]


def scheduled(threads: int = 256) -> tvm.IRModule:
    """Each stage its own kernel: blocks of `threads` threads."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": chain}))
    for name in ("B", "C", "D"):
        (i,) = sch.get_loops(sch.get_sblock(name))
        bx, tx = sch.split(i, [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod


def main() -> None:
    mod = scheduled(256)
    rep = jitflow.compile(mod, "cuda", arch="sm_90").inspect()    # builds, or a cache hit
    print(rep)

    print("\nlaunches, from the host code:")
    for launch in rep.launches:
        grid = ", ".join(d.text for d in launch.grid)
        block = ", ".join(d.text for d in launch.block)
        print(f"  {launch.kernel}: grid ({grid}) block ({block})  host.c:{launch.line}")
    print("allocations, each linked to its line of host C:")
    for a in rep.allocations:
        print(f"  {a.buffer}: {a.bytes} bytes of {a.dtype}  host.c:{a.line}: {rep.host_line(a.line).strip()}")

    # The same module without TVM's storage rewrite: the two intermediates no longer share memory.
    no_reuse = jitflow.compile(mod, "cuda", arch="sm_90", pass_config={"tirx.disable_storage_rewrite": True})
    changes = diff(rep, no_reuse.inspect(), "default passes", "tirx.disable_storage_rewrite")
    print(f"\n{changes}")

    ptx = rep.ptx["sm_90"]
    print(f"\nPTX for sm_90: {len(ptx.splitlines())} lines, {ptx.count('.entry')} kernels")
    try:
        print(f"SASS for sm_90: {len(rep.sass['sm_90'].splitlines())} lines")
    except ToolMissingError as exc:
        print(exc)

    expected = [(N // 256, 256)] * 3
    found = [(x.grid[0].value, x.block[0].value) for x in rep.launches]
    if found != expected or rep.allocation_totals.bytes.value != N * 4:
        raise SystemExit(f"unexpected report: launches {found}, allocations {rep.allocation_totals}")


if __name__ == "__main__":
    main()
