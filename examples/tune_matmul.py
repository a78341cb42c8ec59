"""Tune a matmul with MetaSchedule, every candidate built by jitflow, check the best against numpy and
export it as a shipped library.

    python examples/tune_matmul.py [--trials 64] [--jobs 2] [--seed 1] [--out matmul_tuned.so]
    python examples/tune_matmul.py --cuda [--arch sm_90]      # a GPU machine: the same for a CUDA kernel
    python examples/tune_matmul.py --backend ray              # the builds on a Ray cluster
    python examples/tune_matmul.py --work-dir tune-logs       # resume the tuning recorded there

Needs the tune extra (pip install 'jitflow[tune]'). Each run tunes into a new work folder with the same
seed (the search's and, through jitflow.meta_schedule.seeded, the cost model's) and one search thread,
so it draws the same candidates: run it twice (64 trials: one round of the search) and the second run
builds nothing, every candidate a cache hit (`jitflow cache stats`). Past the first round the search
starts from the candidates measured so far, ordered by their times, which differ between runs: those
rounds draw new candidates. `--tuning-cores N` searches on N threads, whose draws vary from run to run
(most candidates repeat, not all); `--seed -1` draws anew each run; `--work-dir` resumes a database,
which goes on to new candidates (those are built). The candidates are timed by
jitflow.meta_schedule.Runner (on every GPU of one model with --cuda). `jitflow cache ls` lists the
entries as `matmul candidate <id>` (`<function> candidate <id>`). docs/tuning.md says more.
"""
import argparse
import os
import tempfile
import time

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T

import jitflow
from jitflow.meta_schedule import Builder, Runner, seeded

N = 256


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    for i, j, k in T.grid(N, N, N):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=None, help="build processes (default one per core)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--cuda", action="store_true", help="tune a CUDA kernel (needs a GPU to measure)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--work-dir", default=None, help="a MetaSchedule work folder to resume (default a new one)")
    parser.add_argument("--seed", type=int, default=1, help="the search's seed (-1: a new one each run)")
    parser.add_argument("--tuning-cores", type=int, default=1, help="search threads (1: the same draws each run)")
    parser.add_argument("--out", default="matmul_tuned.so")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    if args.cuda:
        target = tvm.target.Target({"kind": "cuda", "arch": args.arch, "max_threads_per_block": 1024,
                                    "max_shared_memory_per_block": 49152}, host={"kind": "llvm", "num-cores": cores})
    else:
        target = tvm.target.Target({"kind": "llvm", "num-cores": cores})
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="tune-matmul-")
    start = time.perf_counter()
    seed = None if args.seed < 0 else args.seed
    runner = Runner()
    with seeded(seed):          # the cost model's draws too: MetaSchedule's seed does not reach them
        database = ms.tune_tir(matmul, target, work_dir, max_trials_global=args.trials,
                               builder=Builder(jobs=args.jobs, backend=args.backend, timeout_s=30),
                               runner=runner, seed=seed, num_tuning_cores=args.tuning_cores)
    runner.close()
    print(f"tuned {args.trials} trials in {time.perf_counter() - start:.1f} s (records in {work_dir})")
    sch = ms.tir_integration.compile_tir(database, matmul, target)
    if sch is None:
        raise SystemExit("no candidate was measured: see the logs in " + work_dir)
    exe = jitflow.compile(sch.mod, target)          # the target tuned for: the library measured, a cache hit
    exe.build()
    print(f"best candidate: {exe.build_info}")
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    if args.cuda:
        dev = tvm.cuda()
        c = tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)
        exe["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    else:
        c = tvm.runtime.tensor(np.zeros((N, N), "float32"))
        exe["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    print("matches numpy")
    print(f"exported {exe.export_library(args.out)} (loads with jitflow.load, TVM's runtime alone)")


if __name__ == "__main__":
    main()
