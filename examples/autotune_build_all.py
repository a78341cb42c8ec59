"""Autotuning-style search: build many schedule candidates in parallel with build_all, time each,
keep the fastest. Runs on the CPU target; the same code builds CUDA candidates.

    python examples/autotune_build_all.py [--jobs 2]
    python examples/autotune_build_all.py --backend ray [--address HEAD:6379]    # on a Ray cluster

With --backend ray the builds run as Ray tasks (pip install 'jitflow[ray]'): on the cluster at
--address, else on a local one started here. Either way every library lands in this machine's
cache, so the timing loop below loads hits. `jitflow cache ls` then lists the candidates by name.
"""
import argparse
import time

import numpy as np
import tvm
from tvm.script import tirx as T

import jitflow

N = 256


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    for i, j, k in T.grid(N, N, N):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def candidate(tile_i: int, tile_j: int) -> tvm.IRModule:
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": matmul}))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, tile_i])
    jo, ji = sch.split(j, [None, tile_j])
    sch.reorder(io, jo, k, ii, ji)
    return sch.mod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="a Ray cluster's head (with --backend ray)")
    args = parser.parse_args()
    if args.backend == "ray" and args.address:
        import ray

        ray.init(address=args.address)
    tiles = [(ti, tj) for ti in (4, 8, 16, 32) for tj in (8, 16, 32, 64)]
    exes = [jitflow.compile(candidate(ti, tj), "c", name=f"matmul tile {ti}x{tj}") for ti, tj in tiles]
    start = time.perf_counter()
    results = jitflow.build_all(exes, jobs=args.jobs, backend=args.backend)
    built = sum(r.outcome == "built" for r in results)
    print(f"{len(exes)} candidates: {built} built, {len(exes) - built} from the cache, "
          f"in {time.perf_counter() - start:.1f} s")
    a_np, b_np = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    a, b = tvm.runtime.tensor(a_np), tvm.runtime.tensor(b_np)
    best = None
    for (ti, tj), exe, res in zip(tiles, exes, results):
        if not res.ok:
            print(f"tile {ti}x{tj}: {res.error_type}: {res.error}")
            continue
        c = tvm.runtime.tensor(np.zeros((N, N), "float32"))
        f = exe["main"]
        f(a, b, c)
        np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-3)
        start = time.perf_counter()
        for _ in range(3):
            f(a, b, c)
        ms = (time.perf_counter() - start) / 3 * 1000
        if best is None or ms < best[0]:
            best = (ms, ti, tj)
    print(f"fastest: tile {best[1]}x{best[2]} at {best[0]:.2f} ms per call (all results match numpy)")


if __name__ == "__main__":
    main()
