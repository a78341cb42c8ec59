"""inspect tells which GPUs and drivers a library serves: SASS archs, PTX arch and ISA, oldest driver;
for a build, a cache entry and a bare .so, in text and JSON."""
from __future__ import annotations

import json

import kernels
from conftest import run_python

import jitflow
from jitflow.report import Report, inspect_entry, inspect_library


def test_compatibility_of_a_build_an_entry_and_a_library(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"])
    path = exe.export_library(tmp_path / "v.so")
    for rep in (exe.inspect(), inspect_entry(exe.key), inspect_library(path)):
        c = rep.compatibility
        assert c.sass == ("sm_80", "sm_90") and c.ptx == (("compute_80", "9.0"),)
        assert c.sass_min_driver == "13.0" and c.ptx_min_driver == "13.0" and c.min_driver == "13.0"
        assert [e.isa for e in rep.fatbin if e.kind == "ptx"] == ["9.0"]
        assert "runs on: SASS sm_80, sm_90" in str(rep) and "PTX compute_80 ISA 9.0" in str(rep)
        assert Report.from_json(rep.to_json()) == rep
    assert exe.inspect().compatibility.floor == "13.0"          # known from the build's metadata
    assert inspect_library(path).compatibility.floor is None    # a bare library does not record it


def test_json_of_a_library_with_newer_ptx(cache_dir, tmp_path):
    path = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_80", cuda_floor="13.5") \
        .export_library(tmp_path / "v95.so")
    proc = run_python(f"""
        import sys
        from jitflow.cli.main import main
        sys.exit(main(["inspect", {str(path)!r}, "--json"]))
    """)
    d = json.loads(proc.stdout)
    assert d["compatibility"]["ptx"] == [{"arch": "compute_80", "isa": "9.5"}]
    shown = run_python(f"""
        import sys
        from jitflow.cli.main import main
        sys.exit(main(["inspect", {str(path)!r}, "--section", "ptx"]))
    """).stdout
    assert shown.startswith("// ---- PTX sm_80 ----\n.version 9.5\n"), shown[:200]   # a library's PTX, at once
    assert d["compatibility"]["min_driver"] == "13.5" and d["compatibility"]["sass"] == ["sm_80"]
    assert {e["kind"]: e["isa"] for e in d["fatbin"]} == {"sass": None, "ptx": "9.5"}


def test_ptx_shown_for_the_lowest_arch_is_the_shipped_ptx(cache_dir):
    rep = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"]).inspect()
    assert ".version 9.0" in rep.ptx["sm_80"]            # what the driver JIT-compiles
    assert ".target sm_90" in rep.ptx["sm_90"]           # the other arch: made from the source
