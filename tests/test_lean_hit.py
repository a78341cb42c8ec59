"""A cache hit imports only what a hit needs: the key's inputs, the disk cache's lookup and checks, the
loader. The builder, the compilers' wrappers, the shared tier (unless JITFLOW_REMOTE_CACHE is set)
and the cache's admin are imported on first real use, never by a process whose library is cached.

Each library is built beforehand in this file's private cache; a fresh interpreter then gets hits
on each path (exe["main"], exe.jit(), exe.export_library(), a Relax model's exe.vm(), a CUDA
library's export) and says which of the modules below each step brought in."""
from __future__ import annotations

import importlib.util
import json

import kernels
import models
import pytest
from conftest import module_cache, run_python

import jitflow

#: what a cache hit must not import: a name covers the module and everything under it
FORBIDDEN = (
    "jitflow.builder",
    "jitflow.toolchain.zig_cc.zig", "jitflow.toolchain.zig_cc.zig_direct", "jitflow.toolchain.zig_cc.zig_pch",
    "jitflow.toolchain.zig_cc.link", "jitflow.toolchain.zig_cc.host_libs", "jitflow.toolchain.zig_cc.builtins_c",
    "jitflow.toolchain.cuda.nvrtc", "jitflow.toolchain.cuda.nvcc", "jitflow.toolchain.cuda.cccl_shim",
    "jitflow.toolchain.cuda.fatbin_build", "jitflow.toolchain.cuda.nvjitlink", "jitflow.toolchain.cuda.ptx_floor",
    "jitflow.cache.shared.tier", "jitflow.cache.store.admin", "jitflow.cache.door",
    "jitflow.cache.deploy.bundle", "jitflow.cache.deploy.bundle_format", "jitflow.cache.deploy.bundle_unpack",
    "jitflow.cache.miss",
    "jitflow.report", "jitflow.tracing",
)

#: the hits, one step at a time; after each, the forbidden modules imported so far
HITS = """
    import json, sys, tempfile
    import numpy as np, tvm, jitflow, kernels, models
    forbidden = {forbidden!r}
    out, seen = tempfile.mkdtemp(), {{}}

    def step(name, exe):
        assert exe.build_info.outcome == "hit", (name, str(exe.build_info))
        seen[name] = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))

    a = tvm.runtime.tensor(np.arange(1024, dtype="float32"))
    c = tvm.runtime.tensor(np.zeros(1024, "float32"))
    exe = jitflow.compile(kernels.vecadd(), "c")
    exe["main"](a, a, c)
    assert (c.numpy() == 2 * np.arange(1024)).all()
    step("cpu kernel exe['main']", exe)
    exe = jitflow.compile(kernels.vecadd(), "c")
    exe.jit()
    exe.export_library(out + "/vecadd.so")
    step("cpu kernel jit() and export_library()", exe)
    exe = jitflow.compile(models.mlp(), "c")
    exe.vm("cpu")["main"](np.ones((4, 16), "float32"))
    step("relax model vm()", exe)
    if {cuda!r}:
        exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90")
        exe.export_library(out + "/vecadd_cuda.so")
        step("cuda kernel export_library()", exe)
    print(json.dumps(seen))
"""


def _nvrtc_installed() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        import nvidia  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def hits(tmp_path_factory, zig_cache):
    """What each hit imported, in a fresh interpreter, after the libraries were built in this process."""
    cuda = _nvrtc_installed()   # a CUDA library builds and exports without a GPU
    with module_cache(tmp_path_factory, zig_cache):
        jitflow.compile(kernels.vecadd(), "c").build()
        jitflow.compile(models.mlp(), "c").build()
        if cuda:
            jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90").build()
        proc = run_python(HITS.format(forbidden=FORBIDDEN, cuda=cuda))
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_cpu_kernel_hit_imports_no_build_machinery(hits):
    assert hits["cpu kernel exe['main']"] == []


def test_every_hit_path_imports_no_build_machinery(hits):
    assert {step: found for step, found in hits.items() if found} == {}
    assert len(hits) >= 3


#: after a plain `import jitflow`, what the docs name is there, each package imported on first use only
PUBLIC = """
    import json, sys
    import jitflow
    before = sorted(m for m in sys.modules if m.split(".")[:2] in (["jitflow", "cache"], ["jitflow", "report"],
                                                                   ["jitflow", "tracing"]))
    reached = [jitflow.cache.pack.__name__, jitflow.cache.unpack.__name__, jitflow.cache.PackResult.__name__,
               jitflow.report.Report.__name__, jitflow.report.inspect_library.__name__, jitflow.report.diff.__name__,
               jitflow.tracing.Trace.__name__, jitflow.tracing.trace.__name__]
    print(json.dumps({"before": before, "reached": reached, "listed": [n in dir(jitflow) for n in
                                                                       ("cache", "report", "tracing")]}))
"""


def test_a_plain_import_reaches_what_the_docs_name_and_imports_it_on_first_use():
    got = json.loads(run_python(PUBLIC).stdout.splitlines()[-1])
    assert got["before"] == []
    assert got["reached"] == ["pack", "unpack", "PackResult", "Report", "inspect_library", "diff", "Trace", "trace"]
    assert got["listed"] == [True, True, True]


def test_the_forbidden_names_are_modules_of_jitflow():
    """A module renamed or moved must be renamed here too, or the checks above look for nothing."""
    missing = [name for name in FORBIDDEN if importlib.util.find_spec(name) is None]
    assert missing == []
