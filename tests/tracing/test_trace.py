"""Tracing without a GPU: CUPTI records (synthetic, with the fields cupti-python 13 gives) turned into
events, split per call, added up, and checked against the report of a real CUDA build."""
from __future__ import annotations

import json
from types import SimpleNamespace

import chrome_events
import models
import pytest
from conftest import cache_at, module_cache, run_python

import jitflow
from jitflow.errors import InvalidInputError, JitflowError
from jitflow.tracing import CopyEvent, KernelEvent, MemoryEvent, MemsetEvent, Trace, Window
from jitflow.tracing.cupti_source import Names, to_event
from jitflow.tracing.summary import peak_in_use, split

# record kinds and enum values as cupti-python 13.0.1 numbers them
MEMCPY, MEMSET, KERNEL, MEMORY2 = 1, 2, 10, 49
HTOD, DTOH, DTOD = 1, 2, 8
DEVICE, DEVICE_STATIC = 3, 6
ALLOCATION, RELEASE = 1, 2
FALLBACK = Names.from_cupti(SimpleNamespace())     # no enums: the tables measured with 13.0.1


def memory(op, kind, nbytes, t):
    return SimpleNamespace(kind=MEMORY2, memory_operation_type=op, memory_kind=kind, bytes=nbytes, address=0x7f00,
                           timestamp=t, correlation_id=5, device_id=0, context_id=1, stream_id=7, name=None)


def memcpy(copy_kind, nbytes, start, end):
    return SimpleNamespace(kind=MEMCPY, copy_kind=copy_kind, bytes=nbytes, start=start, end=end, src_kind=0,
                           dst_kind=3, correlation_id=6, stream_id=7)


def kernel(name, grid, block, start, end):
    return SimpleNamespace(kind=KERNEL, name=name, grid_x=grid[0], grid_y=grid[1], grid_z=grid[2], block_x=block[0],
                           block_y=block[1], block_z=block[2], dynamic_shared_memory=0, static_shared_memory=6912,
                           registers_per_thread=40, start=start, end=end, correlation_id=8, stream_id=7)


def test_records_become_events():
    assert to_event(memory(ALLOCATION, DEVICE, 4096, 100), FALLBACK) == \
        MemoryEvent("allocation", "device", 4096, 0x7f00, 100)
    assert to_event(memory(RELEASE, DEVICE_STATIC, 64, 101), FALLBACK).memory_kind == "device_static"
    assert to_event(memcpy(HTOD, 2048, 200, 260), FALLBACK) == CopyEvent("host->device", 2048, 200, 260)
    assert to_event(memcpy(DTOH, 8, 300, 310), FALLBACK).direction == "device->host"
    assert to_event(memcpy(DTOD, 8, 300, 310), FALLBACK).direction == "device->device"
    memset = SimpleNamespace(kind=MEMSET, bytes=512, value=0, start=400, end=405)
    assert to_event(memset, FALLBACK) == MemsetEvent(512, 0, 400, 405)
    assert to_event(kernel("k", (16, 1, 1), (8, 16, 1), 500, 900), FALLBACK) == \
        KernelEvent("k", (16, 1, 1), (8, 16, 1), 0, 6912, 40, 500, 900)
    # a field missing from a record (another cupti-python version) reads as 0, never raises
    assert to_event(SimpleNamespace(kind=KERNEL, name="k"), FALLBACK) == \
        KernelEvent("k", (0, 0, 0), (0, 0, 0), 0, 0, 0, 0, 0)
    assert to_event(SimpleNamespace(kind=MEMORY2, memory_operation_type=0), FALLBACK) is None   # INVALID
    assert to_event(SimpleNamespace(kind=5, cbid=3), FALLBACK) is None                          # DRIVER: unused


def test_fallback_tables_match_the_installed_cupti_python():
    cupti = pytest.importorskip("cupti.cupti", reason="cupti-python is not installed")
    real = Names.from_cupti(cupti)
    for table in ("kinds", "copy_kinds", "memory_kinds", "operations"):
        fallback = getattr(FALLBACK, table)
        assert {k: getattr(real, table)[k] for k in fallback} == fallback


def test_events_split_by_call_windows():
    events = [
        MemoryEvent("allocation", "device", 4096, 1, 10),             # start-up
        CopyEvent("host->device", 2048, 12, 14),
        MemoryEvent("allocation", "device", 4096, 2, 105),            # call 1
        KernelEvent("b", (1, 1, 1), (32, 1, 1), 0, 0, 8, 130, 140),
        KernelEvent("a", (2, 1, 1), (32, 1, 1), 0, 0, 8, 110, 125),
        MemoryEvent("allocation", "device_static", 256, 3, 106),
        CopyEvent("device->host", 32, 160, 161),                      # between calls
        KernelEvent("a", (2, 1, 1), (32, 1, 1), 0, 0, 8, 210, 230),   # call 2
        MemsetEvent(64, 0, 220, 221),
        MemoryEvent("release", "device", 4096, 2, 300),               # after the last call
    ]
    s = split(events, [Window("call 2", 200, 250), Window("call 1", 100, 150)])
    assert [c.label for c in s.calls] == ["call 1", "call 2"]
    first, second = s.calls
    assert first.kernels == ["a", "b"] and first.kernel_time_ns == 25
    assert (first.allocations.count, first.allocations.bytes) == (2, 4352)
    assert first.allocated("device").count == 1 and first.allocated("device_static").bytes == 256
    assert second.kernels == ["a"] and second.memsets.bytes == 64 and second.allocations.count == 0
    assert s.before.copy("host->device").bytes == 2048 and s.before.allocations.count == 1
    assert s.between.copy("device->host").count == 1 and s.between.releases.bytes == 4096
    assert s.total.allocations.count == 3 and len(s.total.launches) == 3
    assert s.total.copy("device->device").count == 0


class FakeSource:
    """A source with a clock that ticks on every read; `emit` adds events at the current time, as the
    driver would while a call runs."""

    def __init__(self):
        self.clock = 1000
        self.events = []
        self.record_counts = {"MEMCPY": 0}
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def now(self):
        self.clock += 10
        return self.clock

    def sync(self):
        self.clock += 1

    def emit(self, *events):
        for make in events:
            self.clock += 1
            self.events.append(make(self.clock))

    def stop(self):
        self.stopped = True
        return self.events


@pytest.fixture(scope="module")
def mlp_report(tmp_path_factory, zig_cache):
    """The report of the MLP built for sm_90 (no GPU needed to build it)."""
    with module_cache(tmp_path_factory, zig_cache, "trace-cache"):
        yield jitflow.compile(models.mlp(), "cuda", arch="sm_90").inspect()


def _run_model(source, report, first_kernel="fused_matmul_add_relu_kernel", grid=(1, 1, 1), upload=None):
    """What a VM start-up and three calls of the MLP make the driver do, replayed through a Trace."""
    upload = upload if upload is not None else [c.bytes for c in report.model.constants]
    launches = report.model.function("main").launches

    def one_call(allocate):
        source.emit(*[(lambda t: MemoryEvent("allocation", "device", 4096, 1, t))] * allocate)
        for i, x in enumerate(launches):
            name = first_kernel if i == 0 else x.kernel
            block = tuple(d.value for d in x.block)
            source.emit(lambda t, name=name, block=block: KernelEvent(name, grid, block, 0, 0, 40, t, t + 3))
        return "result"

    with Trace(report, "main", source=source) as t:
        for n in upload:                      # the VM starting: its constants, one copy each
            source.emit(lambda t, n=n: MemoryEvent("allocation", "device", 4096, 9, t),
                        lambda t, n=n: CopyEvent("host->device", n, t, t + 2))
        results = [t.call(one_call, allocate) for allocate in (2, 0, 0)]
    return t, results


def test_a_trace_that_matches_the_report(mlp_report):
    source = FakeSource()
    t, results = _run_model(source, mlp_report)
    assert source.started and source.stopped and results == ["result"] * 3
    assert [c.label for c in t.calls] == ["call 1", "call 2", "call 3"]
    assert [c.allocated("device").count for c in t.calls] == [2, 0, 0]       # the pool's reuse, as traced
    assert t.before.copy("host->device").bytes == mlp_report.model.constant_bytes == 3232
    a = t.agreement
    assert a.ok and a.upload_measured == a.upload_expected == 3232
    assert a.expected == ("fused_matmul_add_relu_kernel", "fused_matmul1_add1_kernel")
    assert [k.launches for k in t.kernels] == [3, 3]
    text = str(t)
    assert "the trace agrees with the report" in text and "call 3" in text
    assert "start-up upload: 3232 B host->device equals the constants' 3232 B" in text
    d = json.loads(t.to_json(events=True))
    assert d["schema"] == "jitflow.trace/1" and d["agreement"]["ok"] is True
    assert [c["allocations"]["count"] for c in d["calls"]] == [2, 0, 0]
    assert d["before"]["copies"]["host->device"] == {"count": 4, "bytes": 3232, "time_ns": 8}
    assert len(d["events"]) == len(t.events) == 8 + 2 + 6


def test_a_trace_that_disagrees_says_where(mlp_report):
    t, _ = _run_model(FakeSource(), mlp_report, first_kernel="matmul_kernel", grid=(2, 1, 1), upload=[2048, 128])
    a = t.agreement
    assert not a.ok and not a.upload_ok and a.upload_measured == 2176
    (first, *_) = a.calls
    assert first.missing == ("fused_matmul_add_relu_kernel",) and first.extra == ("matmul_kernel",)
    assert first.dims == ("fused_matmul1_add1_kernel grid (1, 1, 1) in the report, (2, 1, 1) launched",)
    assert a.unknown_kernels == ("matmul_kernel",)
    text = str(t)
    assert "the trace does not agree with the report" in text
    assert "call 1 differs from the report: missing fused_matmul_add_relu_kernel" in text
    assert "2176 B host->device differs from the constants' 3232 B" in text


def test_trace_misuse_is_explained(mlp_report):
    t = Trace(mlp_report, source=FakeSource())
    with pytest.raises(InvalidInputError, match="inside `with jitflow.trace"):
        t.call(print)
    with pytest.raises(InvalidInputError, match="after the `with` block"):
        t.calls
    with t:
        pass
    assert t.calls == () and t.agreement.calls == ()
    with pytest.raises(InvalidInputError, match="records once"):
        with t:
            pass


def test_cpu_target_says_what_tracing_cannot_show(cache_dir):
    exe = jitflow.compile(models.mlp(), "c")
    with pytest.raises(InvalidInputError) as info:
        exe.trace("main", None)
    message = str(info.value)
    assert "CPU ('c' target)" in message and "exe.inspect()" in message and "CUDA driver" in message
    assert exe.build_info is None          # said before building anything


def test_without_cupti_python_the_error_names_the_extra(cache_dir):
    proc = run_python("""
        import sys
        sys.modules["cupti"] = None            # as if cupti-python were not installed
        import jitflow, models
        from jitflow.errors import ToolMissingError
        exe = jitflow.compile(models.mlp(), "cuda", arch="sm_90")
        for attempt in (lambda: jitflow.trace(), lambda: exe.trace("main")):
            try:
                attempt()
            except ToolMissingError as exc:
                print("ToolMissingError:", exc)
    """)
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all("pip install 'jitflow[trace]'" in line for line in lines)


def test_cupti_without_a_driver_is_a_clear_error():
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed")
    from conftest import _gpu_present

    if _gpu_present():
        pytest.skip("a GPU is present: tracing starts")
    with pytest.raises(JitflowError, match="CUPTI could not start tracing"):
        with jitflow.trace():
            pass


def test_a_kernel_record_says_whether_a_cuda_graph_launched_it():
    record = kernel("k", (1, 1, 1), (32, 1, 1), 5, 9)
    assert to_event(record, FALLBACK).replayed is False
    record.graph_id = 7
    event = to_event(record, FALLBACK)
    assert event.graph_id == 7 and event.replayed and event.to_json()["replayed"] is True


def test_bytes_in_use_and_the_timeline_of_a_trace(mlp_report, tmp_path):
    events = [MemoryEvent("allocation", "device", 100, 1, 10), MemoryEvent("allocation", "device", 50, 2, 11),
              MemoryEvent("release", "device", 100, 1, 12), MemoryEvent("allocation", "device", 70, 3, 13),
              MemoryEvent("release", "device", 4096, 99, 14),              # allocated before: counts as nothing
              MemoryEvent("allocation", "device_static", 999, 4, 15)]
    assert peak_in_use(events) == 150 and split(events, [Window("call 1", 0, 20)]).calls[0].peak_in_use == 150
    source = FakeSource()
    with Trace(mlp_report, "main", source=source) as t:
        t.call(lambda: source.emit(lambda c: MemoryEvent("allocation", "device", 512, 1, c),
                                   lambda c: KernelEvent("fused_matmul_add_relu_kernel", (1, 1, 1), (8, 16, 1), 0, 0,
                                                         40, c, c + 5),
                                   lambda c: MemoryEvent("allocation", "device", 128, 2, c),
                                   lambda c: MemoryEvent("release", "device", 512, 1, c)))
    assert t.calls[0].peak_in_use == 640 and t.to_dict()["calls"][0]["peak_in_use"] == 640
    events = chrome_events.check(t.timeline())
    assert chrome_events.counter_max(events) == 640
    assert [e["name"] for e in events if e["ph"] == "X"] == ["call 1", "fused_matmul_add_relu_kernel"]
    assert sum(1 for e in events if e["ph"] == "b") == 2          # each allocation's lifetime, released or not
    assert t.timeline(tmp_path / "trace.json") == tmp_path / "trace.json"     # the path, not the document
    assert json.loads((tmp_path / "trace.json").read_text()) == t.timeline()


def test_a_cuda_graph_trace_against_its_report(tmp_path_factory, zig_cache, shared_cache):
    with cache_at(shared_cache, zig_cache):
        report = jitflow.compile(models.convnet(), "cuda", arch="sm_90",
                                 pass_config={"relax.backend.use_cuda_graph": True}).inspect()
    launches = report.model.function("main").launches

    def run(graph_ids):
        source = FakeSource()

        def one_call():
            for x, graph in zip(launches, graph_ids):
                dims = tuple(d.value for d in x.grid), tuple(d.value for d in x.block)
                source.emit(lambda c, x=x, dims=dims, graph=graph: KernelEvent(x.kernel, *dims, 0, 0, 32, c, c + 2,
                                                                               graph))
        with Trace(report, "main", source=source) as t:
            for _ in range(2):
                t.call(one_call)
        return t.agreement

    replayed = [3 if x.replayed else 0 for x in launches]
    assert sum(1 for g in replayed if g) == 1 and run(replayed).ok        # every call: direct and replayed
    wrong = run([3 if not x.replayed else 0 for x in launches])
    assert not wrong.ok and "max_pool2d_kernel replayed from a CUDA graph in the report, not in the trace" in \
        " ".join(wrong.calls[0].replayed)
    assert run([0] * len(launches)).ok         # a trace that names no graph is not checked for it
