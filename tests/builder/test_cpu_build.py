"""The CPU target end to end: numbers from the built library against numpy."""
from __future__ import annotations

import os
import re

import kernels
import numpy as np
import pytest
import tvm
from conftest import run_python

import jitflow


def _tensor(a):
    return tvm.runtime.tensor(a)


def test_vecadd_jit_matches_numpy(cache_dir):
    exe = jitflow.compile(kernels.vecadd(), "c")
    a, b = np.random.rand(1024).astype("float32"), np.random.rand(1024).astype("float32")
    c = _tensor(np.zeros(1024, "float32"))
    exe.jit()["main"](_tensor(a), _tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)
    assert exe.build_info.outcome == "built"
    # exe["main"] and exe(...) call the same function; jit() is memoized
    c2 = _tensor(np.zeros(1024, "float32"))
    exe(_tensor(a), _tensor(b), c2)
    np.testing.assert_allclose(c2.numpy(), a + b, rtol=1e-6)
    assert exe.jit() is exe.jit()


def test_matmul_and_int_dtype(cache_dir):
    a = np.random.rand(128, 128).astype("float32")
    b = np.random.rand(128, 128).astype("float32")
    c = _tensor(np.zeros((128, 128), "float32"))
    jitflow.compile(kernels.matmul(128), "c")["main"](_tensor(a), _tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)
    x = np.arange(100, dtype="int32")
    y = _tensor(np.zeros(100, "int32"))
    jitflow.compile(kernels.vecadd(100, "int32"), "c")(_tensor(x), _tensor(x), y)
    np.testing.assert_array_equal(y.numpy(), 2 * x)


def test_primfunc_input_is_named_main(cache_dir):
    func = kernels.axpb(3.0)["main"]
    exe = jitflow.compile(func, "c")
    a = np.random.rand(64).astype("float32")
    c = _tensor(np.zeros(64, "float32"))
    exe["main"](_tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * 3 + 1, rtol=1e-6)
    assert exe.functions == ["main"]


def test_cache_disabled_builds_in_temporary_folder(cache_dir, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    exe = jitflow.compile(kernels.axpb(5.0), "c")
    a = np.random.rand(64).astype("float32")
    c = _tensor(np.zeros(64, "float32"))
    exe["main"](_tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * 5 + 1, rtol=1e-6)
    assert not cache_dir.joinpath("v1", "entries").exists()
    assert not exe.build_info.library.exists()  # the temporary build folder is gone


@pytest.mark.parametrize("runtime_only", [False, True], ids=["full-tvm", "runtime-only"])
def test_export_then_load_in_fresh_process(cache_dir, tmp_path, runtime_only):
    out = tmp_path / "axpb.so"
    path = jitflow.compile(kernels.axpb(4.0), "c").export_library(out)
    assert path == out and out.is_file()
    env = {"TVM_USE_RUNTIME_LIB": "1"} if runtime_only else {}
    proc = run_python(f"""
        import sys, numpy as np, tvm, jitflow
        assert tvm.base._RUNTIME_ONLY == {runtime_only}
        m = jitflow.load({str(out)!r})
        a = np.arange(64, dtype="float32")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        m["main"](tvm.runtime.tensor(a), c)
        np.testing.assert_allclose(c.numpy(), a * 4 + 1)
        print("ok", "tvm_compiler" in tvm.base._LOADED_LIBS)
    """, env=env)
    assert proc.stdout.split() == ["ok", str(not runtime_only)]


def test_export_does_not_leave_partial_files(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.axpb(6.0), "c")
    exe.export_library(tmp_path / "a.so")
    exe.export_library(tmp_path / "a.so")  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["a.so"]
    with pytest.raises(jitflow.errors.InvalidInputError, match="does not exist"):
        exe.export_library(tmp_path / "missing" / "a.so")


@pytest.mark.parametrize("name, suffix", [("x.tar", ".tar"), ("x.tar.gz", ".tar.gz"), ("x.TGZ", ".tgz"),
                                          ("x.zip", ".zip"), ("x.o", ".o"), ("libx.a", ".a")])
def test_export_refuses_a_name_that_promises_another_format(cache_dir, tmp_path, name, suffix):
    exe = jitflow.compile(kernels.axpb(6.0), "c")
    with pytest.raises(jitflow.errors.InvalidInputError, match=f"{re.escape(name)} ends in {re.escape(suffix)}, "
                                                               "which names .*name it with .so"):
        exe.export_library(tmp_path / name)
    assert exe.build_info is None                     # refused before anything was built
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == []
    for fine in ("libx.so.1", "x.so", "kernel", "x.tar.so"):   # a .so under any other name is written
        assert exe.export_library(tmp_path / fine).read_bytes()[:4] == b"\x7fELF"


def test_export_takes_tvms_arguments_at_their_defaults_and_refuses_the_others(cache_dir, tmp_path):
    """TVM's Executable.export_library(file_name, *, fcompile, addons, workspace_dir, **kwargs for
    fcompile) and its Module's fpack_imports: at their defaults they ask for nothing, and are taken; a
    value is a jitflow InvalidInputError naming the argument (TVM's habit met a bare TypeError)."""
    exe = jitflow.compile(kernels.axpb(6.0), "c")
    refused = {"fcompile": (print, "compiles and links the library when it builds it"),
               "fpack_imports": (print, "packs the device code"), "addons": (["extra.o"], "links the library"),
               "options": (["-O3"], "hands extra keyword arguments to fcompile"),
               "cc": ("g++", "hands extra keyword arguments to fcompile"),
               "workspace_dir": (3, "give a folder")}
    for name, (value, why) in refused.items():
        with pytest.raises(jitflow.errors.InvalidInputError, match=f"export_library: {name}=.*{why}"):
            exe.export_library(tmp_path / "x.so", **{name: value})
    assert exe.build_info is None and not (tmp_path / "x.so").exists()     # refused before anything was built
    out = exe.export_library(tmp_path / "x.so", fcompile=None, fpack_imports=None, addons=[],
                             workspace_dir=str(tmp_path))
    assert out == tmp_path / "x.so" and out.read_bytes()[:4] == b"\x7fELF"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["x.so"]


def test_inspect_source_of_a_jitted_library_is_its_host_c(cache_dir, tmp_path, monkeypatch):
    """As TVM's C-built module answers: the host C the build kept (it was ''); where the library has
    none to show, an error that says where the C is."""
    exe = jitflow.compile(kernels.axpb(6.0), "c")
    lib = exe.jit()
    host_c = lib.inspect_source()
    assert host_c == lib.inspect_source("c") == exe.inspect().host_c and "__tvm_ffi_main" in host_c
    assert lib.inspect_source("ll") == ""                       # another format: TVM's answer
    loaded = jitflow.load(exe.export_library(tmp_path / "axpb.so"))
    with pytest.raises(jitflow.errors.InvalidInputError, match=r"does not carry its host C: exe.inspect\(\).host_c"):
        loaded.inspect_source()
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    uncached = jitflow.compile(kernels.axpb(7.0), "c").jit()     # its build folder is gone once loaded
    with pytest.raises(jitflow.errors.InvalidInputError, match=r"no longer at .*exe.inspect\(\).host_c"):
        uncached.inspect_source()


def test_float16_on_the_cpu(cache_dir):
    a = np.random.rand(256).astype("float16")
    b = np.random.rand(256).astype("float16")
    c = _tensor(np.zeros(256, "float16"))
    jitflow.compile(kernels.vecadd(256, "float16"), "c")["main"](_tensor(a), _tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-3)


def test_export_refuses_what_it_would_replace_and_replaces_a_link_not_its_target(cache_dir, tmp_path):
    import socket
    import stat

    exe = jitflow.compile(kernels.axpb(6.0), "c")
    fifo, folder, sock = tmp_path / "fifo", tmp_path / "folder", tmp_path / "sock"
    os.mkfifo(fifo)
    folder.mkdir()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
    places = {fifo: r"a FIFO \(named pipe\)", folder: "a directory", sock: "a socket"}
    if os.getuid() == 0:               # a copy of /dev/null: a character device of our own
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        places[tmp_path / "null"] = "a character device"
    (tmp_path / "to-fifo").symlink_to(fifo)
    places[tmp_path / "to-fifo"] = r"a FIFO \(named pipe\)"
    for place, kind in places.items():
        mode = os.lstat(place).st_mode
        with pytest.raises(jitflow.errors.InvalidInputError, match=f"is {kind}; the library would replace it"):
            exe.export_library(place)
        assert os.lstat(place).st_mode == mode     # still what it was
    # a link to a regular file is replaced itself, as cc -o does; the file it pointed to is untouched
    (tmp_path / "old.so").write_bytes(b"old")
    (tmp_path / "link.so").symlink_to(tmp_path / "old.so")
    exe.export_library(tmp_path / "link.so")
    assert not (tmp_path / "link.so").is_symlink() and (tmp_path / "link.so").read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "old.so").read_bytes() == b"old"
