"""build_all's batches: a worker builds several items, each in a thread of its own, and their host C
compiles in one compiler process (toolchain/zig_cc/compile_batch.py, cc1_batch.py).

The items take turns up to their host compile (lowering is Python and TVM, which one thread at a
time runs anyway): the next item starts once the one before has handed its source to the batch
or will not, so that each build's time limit counts from its own start. The libraries are those
each item builds alone; every item has its own result and error.
"""
from __future__ import annotations

import threading
from typing import Callable

from ..toolchain.zig_cc import compile_batch

#: an item's result, as local.py hands it back: (index, ok, outcome, error, error type)
Done = tuple[int, bool, str, "str | None", "str | None"]


def build_batch(todo: list[int], build_one: Callable[[int], Done]) -> list[Done]:
    """build_one(i) for each i in `todo`, their host compiles shared; results in `todo`'s order."""
    results: list[Done | None] = [None] * len(todo)
    threads: list[threading.Thread] = []
    lock = threading.Lock()

    def start(n: int) -> None:
        with lock:
            if n >= len(todo) or n < len(threads):
                return
            thread = threading.Thread(target=run, args=(n,), name=f"jitflow-batch-{n}", daemon=True)
            threads.append(thread)
        thread.start()

    def run(n: int) -> None:
        with compile_batch.joined(batch.members[n]):
            results[n] = build_one(todo[n])

    batch = compile_batch.Batch(len(todo), settled=lambda member: start(member.index + 1))
    start(0)
    n = 0
    while True:                      # threads are started by the ones before them
        with lock:
            if n >= len(threads):
                break
            thread = threads[n]
        thread.join()
        n += 1
    return [r for r in results if r is not None]
