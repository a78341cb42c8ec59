"""A measuring process of jitflow.meta_schedule.Runner: it times candidates exactly as MetaSchedule's
LocalRunner does, one at a time, and stays up between them.

    python -m jitflow.meta_schedule.measure_worker READ_FD WRITE_FD

What it measures is LocalRunner's: its default argument filling (alloc_argument_common with TVM's
random fill for measuring) and its default evaluator (run_evaluator_common: the module's
time_evaluator with the EvaluatorConfig's number, repeat, min_repeat_ms and CPU cache flush). What
it does not do again for every candidate:

- a library (`.so`: jitflow's artifacts, a copy of the cache's verified entry) is loaded through
  jitflow's loader (its digest and this machine checked, then dlopen; nothing linked); other
  artifacts (LocalBuilder's `.tar`) through tvm.runtime.load_module, as LocalRunner does;
- the arguments are allocated and filled once per workload and shape (the last few kept), not for
  every candidate;
- where the parent sends the next request early (GPU candidates), its library is loaded by a reader
  thread while the current one is timed on the GPU; CPU candidates are loaded and timed alone.

Requests and answers are JSON through multiprocessing.connection's framing: first `{"ready": pid}`,
then one answer per request, in order: `{"id", "ok", "costs" | "error", "restart", "seconds"}`. After
an error on a GPU (an illegal address leaves its context unusable) the answer says `restart` and the
process ends. A crash kills the process: the parent sees its pipe close and names the candidate;
faulthandler writes the Python stack to stderr, which the parent reads back for the message.
"""
from __future__ import annotations

import faulthandler
import json
import os
import queue
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any

#: argument sets kept (one per workload and shape on a device)
KEPT_ARGUMENTS = 8
#: device types MetaSchedule may name for a CPU target
CPU_TYPES = ("cpu", "llvm", "c")


def device_name(device_type: str) -> str:
    """TVM's device name for a RunnerInput's device_type (a CPU target's kind is measured on the CPU)."""
    return "cpu" if device_type in CPU_TYPES else device_type


class _Loaded:
    """A request with its library, loaded here or by the reader thread (`error` if that failed)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.module: Any = None
        self.error: str | None = None
        self.seconds = 0.0
        self.done = threading.Event()

    def load(self) -> None:
        start = time.perf_counter()
        try:
            self.module = _load(self.request["artifact"])
        except Exception as exc:  # noqa: BLE001 - the candidate's error, answered with it
            self.error = f"loading {self.request['artifact']}: {type(exc).__name__}: {exc}"
        self.seconds = time.perf_counter() - start
        self.done.set()


def _load(path: str) -> Any:
    if path.endswith(".so"):
        from jitflow.runtime.load import load_library

        return load_library(path)
    import tvm

    return tvm.runtime.load_module(path)


def _unload(module: Any) -> None:
    """Let the library go (jitflow's loader keeps what it loads alive, as tvm_ffi.load_module does)."""
    import tvm_ffi

    try:
        tvm_ffi.get_global_func("ffi.ModuleGlobalsRemove")(module)
    except Exception:  # noqa: BLE001 - kept loaded: memory, not measurements, is what that costs
        pass


class Measurer:
    """Times requests as LocalRunner's worker does, keeping argument sets between candidates."""

    def __init__(self) -> None:
        self.arguments: OrderedDict[str, Any] = OrderedDict()

    def _arguments(self, device: Any, request: dict[str, Any]) -> tuple[Any, float]:
        from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument

        key = json.dumps([str(device), request["args_info"], request["alloc_repeat"]])
        found = self.arguments.get(key)
        if found is not None:
            self.arguments.move_to_end(key)
            return found, 0.0
        start = time.perf_counter()
        args = default_alloc_argument(device, [tuple(a) for a in request["args_info"]], request["alloc_repeat"])
        self.arguments[key] = args
        while len(self.arguments) > KEPT_ARGUMENTS:
            self.arguments.popitem(last=False)
        return args, time.perf_counter() - start

    def measure(self, loaded: _Loaded) -> dict[str, Any]:
        """The answer to one request: its costs, or its error (and whether this process must end)."""
        import tvm
        from tvm.s_tir.meta_schedule.runner import EvaluatorConfig
        from tvm.s_tir.meta_schedule.runner.local_runner import default_run_evaluator

        request = loaded.request
        answer: dict[str, Any] = {"id": request["id"], "ok": False, "restart": False,
                                  "seconds": {"load": loaded.seconds, "alloc": 0.0, "evaluator": 0.0}}
        if loaded.error is not None:
            answer["error"] = loaded.error
            return answer
        name = device_name(request["device_type"])
        step = "allocating the arguments"
        try:
            device = tvm.runtime.device(name, 0)
            args, answer["seconds"]["alloc"] = self._arguments(device, request)
            step = "timing it"
            start = time.perf_counter()
            costs = default_run_evaluator(loaded.module, device, EvaluatorConfig(*request["evaluator"]), args)
            answer["seconds"]["evaluator"] = time.perf_counter() - start
            answer.update(ok=True, costs=[float(c) for c in costs])
        except Exception as exc:  # noqa: BLE001 - the candidate's error, answered with it
            answer["error"] = f"{step} on {name}: {type(exc).__name__}: {str(exc).strip()}"
            answer["restart"] = name != "cpu"       # a device error can leave the context unusable
        finally:
            if loaded.module is not None:
                _unload(loaded.module)
                loaded.module = None
        return answer


def serve(reader: Connection, writer: Connection) -> None:
    """Answer requests until the parent closes the pipe (or a GPU error ends this process)."""
    import tvm  # noqa: F401  (imported before the first request: the parent waits for "ready")
    from tvm.s_tir.meta_schedule.runner import local_runner  # noqa: F401

    import jitflow.runtime.load  # noqa: F401

    writer.send_bytes(json.dumps({"ready": os.getpid()}).encode())
    todo: queue.Queue[_Loaded | None] = queue.Queue()

    def read() -> None:                 # the reader thread: requests in order, GPU libraries loaded early
        try:
            while True:
                loaded = _Loaded(json.loads(reader.recv_bytes()))
                todo.put(loaded)
                if loaded.request.get("prepare"):
                    loaded.load()
        except (EOFError, OSError):
            todo.put(None)

    threading.Thread(target=read, name="jitflow-measure-reader", daemon=True).start()
    measurer = Measurer()
    while True:
        loaded = todo.get()
        if loaded is None:
            return
        if loaded.request.get("prepare"):
            loaded.done.wait()
        else:
            loaded.load()
        answer = measurer.measure(loaded)
        writer.send_bytes(json.dumps(answer).encode())
        if answer["restart"]:
            return


def main(argv: list[str]) -> int:
    faulthandler.enable()           # a crash writes the Python stack to stderr, for the parent's message
    if len(argv) != 3:
        print("usage: python -m jitflow.meta_schedule.measure_worker READ_FD WRITE_FD", file=sys.stderr)
        return 2
    reader = Connection(int(argv[1]), writable=False)
    writer = Connection(int(argv[2]), readable=False)
    try:
        serve(reader, writer)
    except (BrokenPipeError, EOFError):
        pass                        # the parent went away
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
