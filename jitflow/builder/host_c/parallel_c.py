"""The C that hands a parallel launch's body to TVM's thread pool (parallel.py made the body).

For each body `jitflow_parallel_f_k` in the printed host C, written from the parameters TVM printed
for it (so the types are TVM's own), at the end of the prelude (source.py; a clang error there is
jitflow's):

- `struct jitflow_closure_f_k`: the values the body takes, and where a failing task leaves its error;
- `jitflow_lambda_f_k`: the FTVMParallelLambda the pool calls once per task, which calls the body
  with the task's id, the task count of its group env (`penv->num_task`), the env and the values;
- `jitflow_launch_f_k`: what the host function calls in the loop's place; it fills the closure and
  calls TVMBackendParallelLaunch with 0 tasks (the pool's size: TVM_NUM_THREADS, else the cores
  TVM's runtime counts), then returns 0, or -1 with the error a task raised (the first one) raised
  again in the calling thread.

A failed task's error is moved out of its thread (TVMFFIErrorMoveFromRaised) into the closure and the
lambda returns 0, so the pool never handles a failure: TVM's runtime (0.27) counts a failed task done
before it stores its error, so the launching thread may return before the error is there (losing
it, as LLVM's builds sometimes do, or reading it while it is written, which can crash), and at one
thread it drops the lambda's result. The caller gets the body's own error, at any thread count.

Plus the helpers the bodies call: the chunks (task t of n runs [t * c, (t + 1) * c) cut at the
extent, c = ceil(extent / n), as LLVM's host computes it) and the barrier (TVMBackendParallelBarrier
with the group env the body received as a `void*`). Everything here is static, so split.py copies
it into every piece; the closures are types that a kernel's entry functions never name, so
split.split_entries leaves them out of the entries' file, which stays the same for every module of
a signature.
"""
from __future__ import annotations

import re

from ...formats.parallel_functions import BARRIER as BARRIER_HELPER
from ...formats.parallel_functions import BODY, CHUNK_BEGIN, CHUNK_END, CLOSURE, LAMBDA, LAUNCH, LEADING

#: loop types the chunk helpers take; parallel.py computes other integer loops' chunks in int64
CHUNK_TYPES = ("int32", "int64")
_BARRIER = "\n".join([
    f"static inline int32_t {BARRIER_HELPER}(int32_t task_id, void* penv) {{",
    "  return TVMBackendParallelBarrier(task_id, (TVMParallelGroupEnv*)penv);",
    "}"])

_PROTOTYPE = re.compile(rf"^TVM_DLL int32_t {BODY}(\w+)\((.*)\);$", re.MULTILINE)
_FLAG, _ERROR = "jitflow_failed", "jitflow_error"
_HIDDEN = '__attribute__((visibility("hidden"), noinline)) '


def _chunks(ctype: str) -> str:
    return "\n".join([
        f"static inline {ctype} {CHUNK_BEGIN}{ctype[:-2]}({ctype} extent, {ctype} task_id, {ctype} num_task) {{",
        # TVM's pool numbers its tasks from 0: told so, clang knows a loop over a constant extent
        # starts at 0 or above, and divides its indices as unsigned numbers (as LLVM's build does)
        "  __builtin_assume(task_id >= 0 && num_task > task_id);",
        f"  {ctype} chunk = (extent + num_task - 1) / num_task;",
        "  return task_id * chunk < extent ? task_id * chunk : extent;",
        "}",
        f"static inline {ctype} {CHUNK_END}{ctype[:-2]}({ctype} extent, {ctype} task_id, {ctype} num_task) {{",
        "  __builtin_assume(task_id >= 0 && num_task > task_id);",
        f"  {ctype} chunk = (extent + num_task - 1) / num_task;",
        "  return (task_id + 1) * chunk < extent ? (task_id + 1) * chunk : extent;",
        "}"])



def _parameters(text: str) -> list[tuple[str, str]]:
    """(C type, name) of each parameter of a printed prototype's parameter list."""
    out = []
    for param in text.split(", "):
        ctype, _, name = param.rpartition(" ")
        out.append((re.sub(r"\bbool\b", "_Bool", ctype), name))   # <stdbool.h> comes after this text
    return out


_ERRORS = "\n".join([
    "static inline void jitflow_task_failed(void** error, int32_t* failed) {",
    "  /* the error a failed task raised, kept for its launcher (the first one raised); the pool is told",
    "     nothing: its own error path reads the error after it counts the task done */",
    "  TVMFFIObjectHandle raised = NULL;",
    "  void* none = NULL;",
    "  TVMFFIErrorMoveFromRaised(&raised);",
    "  __atomic_store_n(failed, 1, __ATOMIC_RELAXED);",
    "  if (raised != NULL",
    "      && !__atomic_compare_exchange_n(error, &none, raised, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {",
    "    TVMFFIObjectDecRef(raised);",
    "  }",
    "}",
    "static inline int32_t jitflow_launch_status(int32_t status, void* error, int32_t failed) {",
    "  /* after the launch: a task's error raised again in the calling thread */",
    "  if (error != NULL) {",
    "    TVMFFIErrorSetRaised(error);",
    "    TVMFFIObjectDecRef(error);",
    "    return -1;",
    "  }",
    "  return status != 0 ? status : (failed ? -1 : 0);",
    "}"])


def _launch(name: str, params: list[tuple[str, str]]) -> str:
    """The closure, lambda and launcher of the launch `name` whose body has these parameters."""
    leading, values = params[:len(LEADING)], params[len(LEADING):]
    closure, body = f"struct {CLOSURE}{name}", f"{BODY}{name}"
    fields = [f"  {ctype} {n};" for ctype, n in values] + [f"  void* {_ERROR};", f"  int32_t {_FLAG};"]
    taken = ", ".join([f"{ctype} {n}" for ctype, n in values]) or "void"
    passed = ", ".join(["task_id", "penv->num_task", "penv", *(f"closure->{n}" for _, n in values)])
    return "\n".join([
        f"{closure} {{", *fields, "};",
        f"{_HIDDEN}int32_t {body}({', '.join(f'{t} {n}' for t, n in leading + values)});",
        f"static inline int {LAMBDA}{name}(int task_id, TVMParallelGroupEnv* penv, void* cdata) {{",
        f"  {closure}* closure = ({closure}*)cdata;",
        f"  if ({body}({passed}) != 0) {{",
        f"    jitflow_task_failed(&closure->{_ERROR}, &closure->{_FLAG});",
        "  }",
        "  return 0;",
        "}",
        f"static inline int32_t {LAUNCH}{name}({taken}) {{",
        f"  /* {body} runs once per task of TVM's thread pool */",
        f"  {closure} closure = {{{', '.join([n for _, n in values] + ['NULL', '0'])}}};",
        f"  int32_t status = TVMBackendParallelLaunch({LAMBDA}{name}, &closure, 0);",
        f"  return jitflow_launch_status(status, closure.{_ERROR}, closure.{_FLAG});",
        "}"])


def launches_for(source: str) -> str:
    """The C of every parallel launch whose body TVM printed in `source` (empty if none)."""
    if BODY not in source:
        return ""
    found = _PROTOTYPE.findall(source)
    if not found:
        return ""
    helpers = [_chunks(t + "_t") for t in CHUNK_TYPES if CHUNK_BEGIN + t in source]
    helpers += [_BARRIER] if BARRIER_HELPER + "(" in source else []
    helpers.append(_ERRORS)
    return "\n".join([*helpers, *(_launch(name, _parameters(params)) for name, params in found), ""])
