"""How jitflow's host C names the parts of a parallel launch.

A parallel loop of a host function `f` runs on TVM's thread pool (builder/host_c/parallel.py): its
k-th launch in `f` (in the order the host IR holds them) is named `f_k`, and that name gives

- `jitflow_parallel_f_k`: the body, a C function run once per task (`task_id`, `num_task`, the
  pool's group env, then the values it uses), which follows the function that launches it;
- `jitflow_launch_f_k`: what the host function calls in place of the loop (the values the body
  uses, in the body's order); it returns the launch's error code;
- `jitflow_lambda_f_k` and `struct jitflow_closure_f_k`: the FTVMParallelLambda that
  TVMBackendParallelLaunch calls and the values it passes to it (builder/host_c/parallel_c.py);
- a body's loops take their iterations from the helpers below (claimed pieces, or a chunk whole),
  its barriers call `jitflow_barrier(num_task, penv)`.

Readers of the host C (the report) take the body as part of `f`, as they take its compute part.
"""
from __future__ import annotations

import re

BODY = "jitflow_parallel_"
LAUNCH = "jitflow_launch_"
LAMBDA = "jitflow_lambda_"
CLOSURE = "jitflow_closure_"
#: the helpers a body calls (int32 and int64): in a launch that is one loop, the next piece of the
#: loop its task runs (`jitflow_claim_int32(loop, extent, task_id, num_task, penv, prev)`, its first
#: iteration, and `jitflow_claim_end_int32(extent, begin, num_task)`, its end); inside a launch point
#: (and in libraries built before claims), a task's chunk whole (`jitflow_chunk_begin_int32(extent,
#: task_id, num_task)`, ..._end_...); and the barrier between its loops
CLAIM, CLAIM_END = "jitflow_claim_", "jitflow_claim_end_"
CHUNK_BEGIN, CHUNK_END = "jitflow_chunk_begin_", "jitflow_chunk_end_"
BARRIER = "jitflow_barrier"
#: The body's first parameters, before the values it uses (as FTVMParallelLambda receives them).
LEADING = ("task_id", "num_task", "penv")
_NUMBERED = re.compile(r"^(\w+)_\d+$")


def launch_name(function: str, index: int) -> str:
    """The name of the `index`-th parallel launch of the TIR function `function`."""
    return f"{function}_{index}"


def function_of(c_name: str) -> str | None:
    """The TIR function a parallel body, launcher or lambda belongs to; None for any other C name."""
    for prefix in (BODY, LAUNCH, LAMBDA):
        if c_name.startswith(prefix):
            found = _NUMBERED.match(c_name[len(prefix):])
            return found.group(1) if found else None
    return None


def launch_of(c_name: str, prefix: str = BODY) -> str | None:
    """The launch name (`f_k`) of a C name with `prefix` (a body by default), else None."""
    if not c_name.startswith(prefix):
        return None
    rest = c_name[len(prefix):]
    return rest if _NUMBERED.match(rest) else None
