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


def test_header_entry_sizes_of_one_byte_are_load_errors(cache_dir, tmp_path):
    import struct

    data = bytearray(jitflow.compile(kernels.axpb(5002.0), "c").export_library(tmp_path / "k.so").read_bytes())
    paths = []
    for name, offset in (("phentsize", 54), ("shentsize", 58)):
        bad = bytearray(data)
        struct.pack_into("<H", bad, offset, 1)
        (tmp_path / f"{name}.so").write_bytes(bad)
        paths.append(tmp_path / f"{name}.so")
    results = _load_each(paths)
    assert "program headers of 1 bytes" in results[str(paths[0])], results
    assert "section headers of 1 bytes" in results[str(paths[1])], results


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "lib.so"
    os.mkfifo(fifo)
    proc = run_python(f"""
        import jitflow
        from jitflow.errors import LoadError
        for load in (jitflow.load, jitflow.load_vm):
            try:
                load({str(fifo)!r})
            except LoadError as exc:
                print(exc)
    """, timeout=60)
    assert proc.stdout.splitlines() == [f"no library at {fifo}: not a regular file (a FIFO)"] * 2


def test_a_64_gib_sparse_tail_is_refused_unread_by_load_and_inspect(cache_dir, tmp_path):
    from conftest import ROOT

    lib = jitflow.compile(kernels.axpb(5003.0), "c").export_library(tmp_path / "sparse.so")
    os.truncate(lib, 64 << 30)                         # a few KiB on disk, 64 GiB long
    results = _load_each([lib])
    assert "the file has 68719476736 bytes and its ELF headers describe" in results[str(lib)], results
    proc = run_python(f"""
        from jitflow.cli.main import main
        raise SystemExit(main(["inspect", {str(lib)!r}]))
    """, timeout=60, check=False, cwd=ROOT)
    assert proc.returncode == 2 and "its ELF headers describe" in proc.stderr, proc.stderr


def test_the_loader_makes_no_folder_in_tmpdir(cache_dir, tmp_path):
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o777)                                # writable by anyone, and no sticky bit
    lib = jitflow.compile(kernels.axpb(5004.0), "c").export_library(tmp_path / "k.so")
    proc = run_python(f"""
        import numpy as np, jitflow, kernels
        for module in (jitflow.load({str(lib)!r}), jitflow.compile(kernels.axpb(5004.0), "c").jit()):
            out = np.zeros(64, "float32")
            module["main"](np.ones(64, "float32"), out)
            assert (out == 5005.0).all()
        maps = open("/proc/self/maps").read()
        print("loaded from", "/proc/self/fd" in maps or {str(lib)!r} in maps)
    """, env={"TMPDIR": str(shared)})
    assert proc.stdout.split() == ["loaded", "from", "True"]
    assert list(shared.iterdir()) == []
