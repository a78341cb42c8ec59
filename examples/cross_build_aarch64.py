"""Build libraries for an Arm server (NVIDIA Grace Hopper, GH200) on an x86-64 machine.

Builds a CUDA vector add for sm_90 and the same vector add for the Arm CPU, then reads back from
each library the CPU it is for, its glibc baseline and what it links. No GPU, no Arm machine and no
cross toolchain are needed; copy the .so files to the Arm machine and load them there with
jitflow.load (or TVM's own runtime).
"""
import sys
from pathlib import Path

import tvm
from tvm.script import tirx as T

import jitflow
from jitflow.report import read_elf

N = 1024
HOST = "aarch64-linux-gnu"


@T.prim_func(s_tir=True)
def vecadd(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
    for i in range(N):
        with T.sblock("C"):
            vi = T.axis.spatial(N, i)
            C[vi] = A[vi] + B[vi]


def on_gpu(func):
    """The vector add with its loop split over GPU blocks and threads."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx = sch.split(i, [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    builds = {
        "vecadd_gh200.so": jitflow.compile(on_gpu(vecadd), "cuda", arch="sm_90", host=HOST),
        "vecadd_arm_cpu.so": jitflow.compile(vecadd, "c", host=HOST),
    }
    for name, exe in builds.items():
        path = exe.export_library(out_dir / name)
        info = read_elf(path)
        glibc = f"glibc {info.glibc_baseline} or newer" if info.glibc_baseline else "no glibc version needed"
        print(f"{path}: {info.machine}, {info.elf_class}-bit, {glibc}, "
              f"links {', '.join(info.needed) or 'nothing'} ({exe.build_info})")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "build-aarch64"))
