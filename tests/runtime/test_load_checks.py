"""jitflow.load() checks a file before the dynamic loader sees it: a truncated library, one built for
another CPU, or a shared object that is not a TVM library is a LoadError saying which, never a crash.

The loading side runs in a fresh interpreter: a SIGBUS there fails the test instead of killing it.
"""
from __future__ import annotations

import glob
import os

import kernels
import pytest
from conftest import run_python

import jitflow

FRACTIONS = (0.0, 0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)

LOAD_EACH = """
    import sys, jitflow
    from jitflow.errors import LoadError
    for path in {paths!r}:
        try:
            jitflow.load(path)
            print(path, "LOADED")
        except LoadError as exc:
            print(path, "LoadError:", exc)
        sys.stdout.flush()
"""


def _load_each(paths) -> dict[str, str]:
    proc = run_python(LOAD_EACH.format(paths=[str(p) for p in paths]), check=False)
    assert proc.returncode == 0, f"the loading process died ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_truncated_libraries_are_load_errors_not_crashes(cache_dir, tmp_path):
    whole = jitflow.compile(kernels.axpb(5000.0), "c").export_library(tmp_path / "whole.so")
    data = whole.read_bytes()
    paths = []
    for fraction in FRACTIONS:
        cut = tmp_path / f"cut-{fraction}.so"
        cut.write_bytes(data[:int(len(data) * fraction)])
        paths.append(cut)
    results = _load_each(paths + [whole])
    assert results.pop(str(whole)) == "LOADED"
    for path, result in results.items():
        assert result.startswith("LoadError:") and ("truncated" in result or "not a shared library" in result), \
            (path, result)
    assert sum("truncated" in r for r in results.values()) >= len(FRACTIONS) - 2


def test_a_library_for_another_cpu_says_so(cache_dir, tmp_path):
    foreign = jitflow.compile(kernels.axpb(5001.0), "c", host="aarch64-linux-gnu").export_library(tmp_path / "a.so")
    result = _load_each([foreign])[str(foreign)]
    assert result.startswith("LoadError:") and "built for aarch64-linux-gnu" in result, result


def _system_libm() -> str | None:
    for pattern in ("/lib/*-linux-gnu/libm.so.6", "/usr/lib/*-linux-gnu/libm.so.6", "/lib64/libm.so.6",
                    "/usr/lib64/libm.so.6"):
        for path in sorted(glob.glob(pattern)):
            if os.uname().machine in path or pattern.startswith(("/lib64", "/usr/lib64")):
                return os.path.realpath(path)
    return None


def test_a_library_that_is_not_tvms_or_not_a_library_says_so(tmp_path):
    libm = _system_libm()
    if libm is None:
        pytest.skip("no system libm.so.6 found")
    text = tmp_path / "notes.so"
    text.write_text("not a library at all\n" * 10)
    results = _load_each([libm, text, tmp_path / "missing.so"])
    assert results[libm].startswith("LoadError:") and "not a TVM library" in results[libm], results
    assert "not a shared library" in results[str(text)]
    assert "no library at" in results[str(tmp_path / "missing.so")]
