"""PassContext instruments that tests enter around jitflow calls to watch, slow down or forbid
TVM's lowering: real TVM mechanisms reached through the caller's context, no global patched.

    with instruments.context(instruments.Refuse()):
        exe = jitflow.compile(mod, "c"); exe.jit()      # fails if anything is lowered

`context()` enters opt_level=3, jitflow's default, so the cache key is the one without a context.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import tvm
from tvm.ir.instrument import pass_instrument


def context(*instruments: Any) -> tvm.transform.PassContext:
    """A PassContext with jitflow's default opt level and these instruments."""
    return tvm.transform.PassContext(opt_level=3, instruments=list(instruments))


@pass_instrument
class Refuse:
    """Fails the first pass that runs: where a cache hit is expected, nothing may be lowered."""

    def run_before_pass(self, mod, info):
        raise RuntimeError(f"lowering ran (pass {info.name}) where a cache hit was expected")


@pass_instrument
class Before:
    """Calls `action()` once, before the first pass: sleep to be slow, print to signal, stop a server."""

    def __init__(self, action: Callable[[], Any]) -> None:
        self.action = action
        self.done = False

    def run_before_pass(self, mod, info):
        if not self.done:
            self.done = True
            self.action()


def sleep(seconds: float, say: str | None = None) -> Before:
    """An instrument that prints `say` (if given) and sleeps once lowering starts."""

    def act() -> None:
        if say:
            print(say, flush=True)
        time.sleep(seconds)

    return Before(act)


@pass_instrument
class Record:
    """Remembers the name of every pass that runs."""

    def __init__(self) -> None:
        self.passes: list[str] = []

    def run_before_pass(self, mod, info):
        self.passes.append(info.name)
