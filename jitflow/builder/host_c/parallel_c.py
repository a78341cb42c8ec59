"""The C that hands a parallel launch's body to TVM's thread pool (parallel.py made the body).

For each body `jitflow_parallel_f_k` in the printed host C, written from the parameters TVM printed
for it (so the types are TVM's own), at the end of the prelude (source.py; a clang error there is
jitflow's):

- `struct jitflow_closure_f_k`: the values the body takes, and the `struct jitflow_group` its tasks
  share (the claim counts of its loops' chunks, the barrier's counts, whether a task failed, the
  first error);
- `jitflow_lambda_f_k`: the FTVMParallelLambda the pool calls once per task, which marks its thread
  as running a task and calls the body with the task's id, the task count of its group env
  (`penv->num_task`), the group and the values;
- `jitflow_launch_f_k`: what the host function calls in the loop's place; it fills the closure and
  calls TVMBackendParallelLaunch with 0 tasks (the pool's size: TVM_NUM_THREADS, else the cores
  TVM's runtime counts), then returns 0, or -1 with the error a task raised (the first one) raised
  again in the calling thread.

A failed task's error is moved out of its thread (TVMFFIErrorMoveFromRaised) into the group and the
lambda returns 0, so the pool never handles a failure: TVM's runtime (0.27) counts a failed task done
before it stores its error, so the launching thread may return before the error is there (losing
it, as LLVM's builds sometimes do, or reading it while it is written, which can crash), and at one
thread it drops the lambda's result. The caller gets the body's own error, at any thread count.

TVM's pool does not nest: a launch from a worker throws a C++ error through these C frames (which
have no unwind tables, so the process aborts), and one from the thread that runs task 0 reuses that
thread's launcher while it is busy (the launch never ends). A thread that runs a task is therefore
marked in a slot of TVM FFI's per-thread stream table (TASK_SLOT: per process, so every library
sees it), and a launch from a marked thread runs its body there as the one task of its group,
as TVM's runtime does at one thread.

Plus the helpers the bodies call, computed so that no extent of the loop's type overflows:
- the chunks (task t of n owns [t * c, (t + 1) * c) cut at the extent, c = ceil(extent / n), as
  LLVM's host divides it): `jitflow_chunk_begin_*` / `_end_*`, a task's chunk whole;
- the claims: `jitflow_claim_*(loop, extent, task_id, num_task, penv, prev)` is the first
  iteration of the next piece (ceil(c / CLAIM_PIECES) iterations, cut at its chunk's end) the task
  runs, -1 when none is left: first its own chunk's pieces, then, going round the tasks from the
  chunk it ran last, pieces of chunks that have more than one piece left (the last piece of a chunk
  runs on its owner, so every task has work). A chunk's pieces are counted in the group
  (`struct jitflow_claim`, a cache line each, zeroed by the launcher; CLAIM_SLOTS per loop): one
  atomic add per piece. `jitflow_claim_end_*` is the end of the piece that starts at `begin`. At one
  task, or more than CLAIM_SLOTS, a task's piece is its chunk whole and nothing is counted;
- and the barrier (jitflow's own, on the group: TVMBackendParallelBarrier waits for
ever for a task that failed before it). Everything here is static, so split.py copies it into every
piece; the closures are types that a kernel's entry functions never name, so split.split_entries
leaves them out of the entries' file, which stays the same for every module of a signature.
"""
from __future__ import annotations

import re

from ...formats.parallel_functions import BARRIER as BARRIER_HELPER
from ...formats.parallel_functions import (BODY, CHUNK_BEGIN, CHUNK_END, CLAIM, CLAIM_END, CLOSURE, LAMBDA, LAUNCH,
                                           LEADING)
from .c_words import word

#: loop types the chunk and claim helpers take; parallel.py counts other integer loops in int64
HELPER_TYPES = ("int32", "int64")
#: tasks whose chunks can be shared (a launch keeps a claim count for each); a launch of more tasks
#: runs each task's chunk whole, as TVM's LLVM host does
CLAIM_SLOTS = 64
#: the pieces a task's chunk is claimed in
CLAIM_PIECES = 8
#: the slot of TVM FFI's per-thread stream table (device type, id) that marks a thread running a
#: task of a launch: kDLExtDev, a device type no runtime gives streams
TASK_SLOT = ("12", "0")
_GROUP = "\n".join([
    "struct jitflow_claim {",
    "  /* how much of one task's chunk of one loop has been claimed (a cache line of its own) */",
    "  int64_t taken;",
    "} __attribute__((aligned(64)));",
    "struct jitflow_group {",
    f"  /* what the tasks of one launch share: the claim counts of its loops ({CLAIM_SLOTS} per loop),",
    "     the barrier's count of tasks arrived and of barriers passed, whether a task failed,",
    "     and the first error raised */",
    "  struct jitflow_claim* claims;",
    "  int32_t arrived;",
    "  int32_t passed;",
    "  int32_t failed;",
    "  void* error;",
    "};",
    "extern int sched_yield(void);"])
_BARRIER = "\n".join([
    f"static int32_t {BARRIER_HELPER}(int32_t num_task, void* penv) {{",
    "  /* every task waits for the others; once a task has failed (it arrives at no later barrier),",
    "     the waiting tasks leave with -1 and their bodies return */",
    "  struct jitflow_group* group = (struct jitflow_group*)penv;",
    "  int32_t passed = __atomic_load_n(&group->passed, __ATOMIC_ACQUIRE);",
    "  if (__atomic_add_fetch(&group->arrived, 1, __ATOMIC_ACQ_REL) == num_task) {",
    "    __atomic_store_n(&group->arrived, 0, __ATOMIC_RELAXED);",
    "    __atomic_store_n(&group->passed, passed + 1, __ATOMIC_RELEASE);",
    "    return 0;",
    "  }",
    "  while (__atomic_load_n(&group->passed, __ATOMIC_ACQUIRE) == passed) {",
    "    if (__atomic_load_n(&group->failed, __ATOMIC_ACQUIRE)) {",
    "      return -1;",
    "    }",
    "    sched_yield();",
    "  }",
    "  return 0;",
    "}"])

_PROTOTYPE = re.compile(rf"^TVM_DLL int32_t {BODY}(\w+)\((.*)\);$", re.MULTILINE)
#: a claim in a body's text: its loop's number (parallel.py numbers a launch's loops from 0)
_CLAIM_CALL = word(CLAIM, r"int(?:32|64)\((\d+), ")
_GROUP_FIELD = "jitflow_group"
_CLAIMS_FIELD = "jitflow_claims"
_HIDDEN = '__attribute__((visibility("hidden"), noinline)) '


def chunk_helpers(ctype: str) -> str:
    """The chunk helpers of one loop type: `last` is the last task with iterations, so neither
    `extent + num_task - 1` nor `(task_id + 1) * chunk` is computed where it would overflow."""
    head = f"({ctype} extent, {ctype} task_id, {ctype} num_task) {{"
    common = [
        # TVM's pool numbers its tasks from 0: told so, clang knows a loop over a constant extent
        # starts at 0 or above, and divides its indices as unsigned numbers (as LLVM's build does)
        "  __builtin_assume(task_id >= 0 && num_task > task_id);",
        "  if (extent <= 0) {",
        "    return 0;",
        "  }",
        f"  {ctype} chunk = extent / num_task + (extent % num_task != 0);",
        f"  {ctype} last = (extent - 1) / chunk;"]
    # and told that a chunk lies in [0, extent], clang bounds the loop's indices as LLVM's build does
    return "\n".join([
        f"static inline {ctype} {CHUNK_BEGIN}{ctype[:-2]}{head}", *common,
        f"  {ctype} begin = task_id <= last ? task_id * chunk : extent;",
        "  __builtin_assume(begin >= 0 && begin <= extent);",
        "  return begin;",
        "}",
        f"static inline {ctype} {CHUNK_END}{ctype[:-2]}{head}", *common,
        f"  {ctype} end = task_id < last ? (task_id + 1) * chunk : extent;",
        "  __builtin_assume(end >= 0 && end <= extent);",
        "  return end;",
        "}"])


def claim_helpers(ctype: str) -> str:
    """The claim helpers of one loop type (the module's docstring). No value
    they compute overflows the type: a range's end and a piece's end are taken as the smaller of
    two numbers by comparing what is left, never by adding past the extent."""
    name = ctype[:-2]
    chunk = [f"  {ctype} chunk = extent / num_task + (extent % num_task != 0);"]
    return "\n".join([
        f"static inline {ctype} jitflow_piece_{name}({ctype} chunk, {ctype} num_task) {{",
        f"  /* a task's own chunk, in {CLAIM_PIECES} pieces; where claims are not kept, the chunk whole */",
        f"  if (num_task == 1 || num_task > {CLAIM_SLOTS}) {{",
        "    return chunk;",
        "  }",
        f"  return chunk / {CLAIM_PIECES} + (chunk % {CLAIM_PIECES} != 0);",
        "}",
        f"static inline {ctype} {CLAIM_END}{name}({ctype} extent, {ctype} begin, {ctype} num_task) {{",
        "  /* the end of the piece that starts at begin (a value claim_ returned) */",
        "  __builtin_assume(num_task > 0 && begin >= 0 && begin < extent);",
        *chunk,
        f"  {ctype} start = begin / chunk * chunk;",
        f"  {ctype} stop = extent - start > chunk ? start + chunk : extent;",
        f"  {ctype} piece = jitflow_piece_{name}(chunk, num_task);",
        f"  {ctype} end = stop - begin > piece ? begin + piece : stop;",
        "  __builtin_assume(end > begin && end <= extent);",
        "  return end;",
        "}",
        f"static inline {ctype} {CLAIM}{name}(int32_t loop, {ctype} extent, {ctype} task_id, {ctype} num_task,",
        f"                                     void* penv, {ctype} prev) {{",
        "  /* the first iteration of the next piece this task runs (-1: none is left); prev is the one it",
        "     ran last (-1 at first) */",
        "  __builtin_assume(task_id >= 0 && num_task > task_id);",
        "  if (extent <= 0) {",
        "    return -1;",
        "  }",
        *chunk,
        f"  {ctype} last = (extent - 1) / chunk;",
        f"  {ctype} piece = jitflow_piece_{name}(chunk, num_task);",
        "  if (piece == chunk) {",
        f"    {ctype} begin = prev < 0 && task_id <= last ? task_id * chunk : -1;",
        "    __builtin_assume(begin < extent);",
        "    return begin;",
        "  }",
        f"  struct jitflow_claim* claims = ((struct jitflow_group*)penv)->claims + (int64_t)loop * {CLAIM_SLOTS};",
        f"  {ctype} first = prev < 0 ? task_id : prev / chunk;",
        f"  for ({ctype} step = 0; step < num_task; ++step) {{",
        f"    {ctype} owner = first + step < num_task ? first + step : first + step - num_task;",
        "    if (owner > last) {",
        "      continue;",
        "    }",
        f"    {ctype} start = owner * chunk;",
        f"    {ctype} length = owner == last ? extent - start : chunk;",
        "    int64_t taken = __atomic_load_n(&claims[owner].taken, __ATOMIC_RELAXED);",
        "    /* another task's chunk only while it has more than one piece left to run */",
        "    if (owner == task_id ? taken >= length : length - taken <= piece) {",
        "      continue;",
        "    }",
        "    taken = __atomic_fetch_add(&claims[owner].taken, (int64_t)piece, __ATOMIC_RELAXED);",
        "    if (taken < length) {",
        f"      {ctype} begin = start + ({ctype})taken;",
        "      __builtin_assume(begin >= 0 && begin < extent);",
        "      return begin;",
        "    }",
        "  }",
        "  return -1;",
        "}"])


def _parameters(text: str) -> list[tuple[str, str]]:
    """(C type, name) of each parameter of a printed prototype's parameter list."""
    out = []
    for param in text.split(", "):
        ctype, _, name = param.rpartition(" ")
        out.append((re.sub(r"\bbool\b", "_Bool", ctype), name))   # <stdbool.h> comes after this text
    return out


_RUN = "\n".join([
    "static inline void jitflow_task_failed(struct jitflow_group* group) {",
    "  /* the error a failed task raised, kept for its launcher (the first one raised); the pool is told",
    "     nothing: its own error path reads the error after it counts the task done */",
    "  TVMFFIObjectHandle raised = NULL;",
    "  void* none = NULL;",
    "  TVMFFIErrorMoveFromRaised(&raised);",
    "  if (raised != NULL",
    "      && !__atomic_compare_exchange_n(&group->error, &none, raised, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {",
    "    TVMFFIObjectDecRef(raised);",
    "  }",
    "  __atomic_store_n(&group->failed, 1, __ATOMIC_RELEASE);",
    "}",
    "static inline int32_t jitflow_run(FTVMParallelLambda lambda, void* closure, struct jitflow_group* group) {",
    "  /* the lambda on TVM's pool, or as one task in this thread when this thread runs a task of",
    "     another launch (TVM's pool does not nest); then a task's error raised again in this thread */",
    "  int32_t status;",
    f"  if (TVMFFIEnvGetStream({', '.join(TASK_SLOT)}) != NULL) {{",
    "    TVMParallelGroupEnv alone = {.sync_handle = NULL, .num_task = 1};",
    "    status = lambda(0, &alone, closure);",
    "  } else {",
    "    status = TVMBackendParallelLaunch(lambda, closure, 0);",
    "  }",
    "  if (group->error != NULL) {",
    "    TVMFFIErrorSetRaised(group->error);",
    "    TVMFFIObjectDecRef(group->error);",
    "    return -1;",
    "  }",
    "  return status != 0 ? status : (group->failed ? -1 : 0);",
    "}"])


def _launch(name: str, params: list[tuple[str, str]], loops: int) -> str:
    """The closure, lambda and launcher of the launch `name` whose body has these parameters and
    `loops` loops whose pieces are claimed."""
    leading, values = params[:len(LEADING)], params[len(LEADING):]
    closure, body = f"struct {CLOSURE}{name}", f"{BODY}{name}"
    fields = [f"  {ctype} {n};" for ctype, n in values] + [f"  struct jitflow_group {_GROUP_FIELD};"]
    if loops:
        fields.append(f"  struct jitflow_claim {_CLAIMS_FIELD}[{loops * CLAIM_SLOTS}];")
    taken = ", ".join([f"{ctype} {n}" for ctype, n in values]) or "void"
    passed = ", ".join(["task_id", "penv->num_task", f"&closure->{_GROUP_FIELD}",
                        *(f"closure->{n}" for _, n in values)])
    return "\n".join([
        f"{closure} {{", *fields, "};",
        f"{_HIDDEN}int32_t {body}({', '.join(f'{t} {n}' for t, n in leading + values)});",
        f"static inline int {LAMBDA}{name}(int task_id, TVMParallelGroupEnv* penv, void* cdata) {{",
        f"  {closure}* closure = ({closure}*)cdata;",
        "  TVMFFIStreamHandle outer = NULL;",
        f"  TVMFFIEnvSetStream({', '.join(TASK_SLOT)}, cdata, &outer);   /* this thread runs a task */",
        f"  int32_t status = {body}({passed});",
        f"  TVMFFIEnvSetStream({', '.join(TASK_SLOT)}, outer, NULL);",
        "  if (status != 0) {",
        f"    jitflow_task_failed(&closure->{_GROUP_FIELD});",
        "  }",
        "  return 0;",
        "}",
        f"static inline int32_t {LAUNCH}{name}({taken}) {{",
        f"  /* {body} runs once per task of TVM's thread pool; the claim counts start at 0 */",
        f"  {closure} closure = {{{', '.join([n for _, n in values] + ['{NULL, 0, 0, 0, NULL}'])}}};",
        *([f"  closure.{_GROUP_FIELD}.claims = closure.{_CLAIMS_FIELD};"] if loops else []),
        f"  return jitflow_run({LAMBDA}{name}, &closure, &closure.{_GROUP_FIELD});",
        "}"])


def _claimed_loops(source: str, name: str) -> int:
    """How many loops the body of the launch `name` claims pieces of (its definition's claims)."""
    found = re.search(rf"^TVM_DLL int32_t {BODY}{name}\(.*\) \{{$", source, re.MULTILINE)
    if found is None:
        return 0
    text = source[found.end():source.find("\n}\n", found.end())]
    return max((int(k) + 1 for k in _CLAIM_CALL.findall(text)), default=0)


def launches_for(source: str) -> str:
    """The C of every parallel launch whose body TVM printed in `source` (empty if none)."""
    if BODY not in source:
        return ""
    found = _PROTOTYPE.findall(source)
    if not found:
        return ""
    helpers = [_GROUP]
    helpers += [chunk_helpers(t + "_t") for t in HELPER_TYPES if CHUNK_BEGIN + t in source]
    helpers += [claim_helpers(t + "_t") for t in HELPER_TYPES if CLAIM + t in source]
    helpers += [_BARRIER] if BARRIER_HELPER + "(" in source else []
    helpers.append(_RUN)
    launches = [_launch(name, _parameters(params), _claimed_loops(source, name)) for name, params in found]
    return "\n".join([*helpers, *launches, ""])
