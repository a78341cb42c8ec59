"""The host toolchain is the bundled zig: no system compiler, optimized, old glibc baseline."""
from __future__ import annotations

import os
import stat
import sys

import kernels
import pytest
from conftest import run_python
from portability import check_portable

import jitflow
from jitflow.formats import elf as elf_info


def _fake_compilers(folder):
    """cc/gcc/clang/ld that record being called and fail."""
    marker = folder / "called"
    for name in ("cc", "gcc", "g++", "clang", "clang++", "ld", "c++", "llvm-config"):
        tool = folder / name
        tool.write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return marker


def test_builds_with_no_c_compiler_available(cache_dir, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = _fake_compilers(bin_dir)
    env = {"PATH": str(bin_dir), "CC": str(bin_dir / "cc"), "CXX": str(bin_dir / "g++")}
    proc = run_python("""
        import numpy as np, tvm, jitflow, kernels
        exe = jitflow.compile(kernels.axpb(21.0), "c")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(np.ones(64, "float32")), c)
        np.testing.assert_allclose(c.numpy(), 22.0)
        exe2 = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90")
        exe2.export_library(exe2.settings.cache_dir.parent / "cuda.so")
        print(exe.build_info.outcome, exe2.build_info.outcome)
    """, env=env)
    assert proc.stdout.split() == ["built", "built"]
    assert not marker.exists(), f"a system tool was called: {marker.read_text()}"


#: What a library may link besides the TVM runtime symbols resolved at load time.


def test_library_is_optimized_portable_and_sanitizer_free(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.matmul(64), "c", host="x86_64-linux-gnu")
    out = exe.export_library(tmp_path / "mm.so")
    check_portable(elf_info.read(out), "x86_64")
    assert out.stat().st_size < 200_000  # a debug build with the UBSan runtime is megabytes


def test_libm_calls_keep_the_glibc_2_17_baseline(cache_dir, tmp_path):
    # exp, log and pow gained new symbol versions in glibc 2.29; a library that required them
    # would not load on older systems. Its references are unversioned: nothing newer than 2.17 is
    # required, and the loader binds them to the oldest version (test_host_libs.py checks which).
    exe = jitflow.compile(kernels.libm_calls_f64(), "c", host="x86_64-linux-gnu")
    info = elf_info.read(exe.export_library(tmp_path / "libm.so"))
    check_portable(info, "x86_64")
    assert "libm.so.6" in info.needed and "libc.so.6" in info.needed
    assert info.glibc_baseline is None


def test_same_module_builds_byte_identical_libraries(zig_cache, tmp_path):
    code = """
        import jitflow, kernels, hashlib
        exe = jitflow.compile(kernels.matmul(32), "c")
        exe.jit()
        print(hashlib.sha256(exe.build_info.library.read_bytes()).hexdigest())
    """
    digests = {run_python(code, env={"JITFLOW_CACHE_DIR": str(tmp_path / d),
                                     "JITFLOW_ZIG_CACHE_DIR": str(zig_cache)}).stdout.strip()
               for d in ("one", "two")}
    assert len(digests) == 1
    assert sys.platform.startswith("linux") and os.sep == "/"


def _c_file(folder, text):
    (folder / "src").mkdir(exist_ok=True)
    path = folder / "src" / "k.c"
    path.write_text(text)
    return path


def test_a_compile_runs_zigs_clang_directly_and_falls_back_to_zig_cc(tmp_path, zig_cache, monkeypatch):
    from jitflow.errors import CompileError
    from jitflow.toolchain.zig_cc import zig

    source = _c_file(tmp_path, "int jitflow_twice(int x) { return 2 * x; }\n")
    job = zig.compile_object(source, tmp_path / "k.o", [], "x86_64-linux-gnu", zig_cache, tmp_path / "zl")
    job.wait()
    assert job.proc.args[1] == "-cc1" and "src/k.c" in job.proc.args   # clang's compiler proper: no zig cc, no driver
    direct = (tmp_path / "k.o").read_bytes()
    assert direct.startswith(b"\x7fELF") and b"jitflow_twice" in direct
    from jitflow.toolchain.zig_cc import zig_direct

    with monkeypatch.context() as patch:                       # the driver's command writes the same bytes
        patch.setattr(zig_direct.Probe, "compiler_proper", lambda self: None)
        driver = zig.compile_object(source, tmp_path / "kd.o", [], "x86_64-linux-gnu", zig_cache, tmp_path / "zl")
        driver.wait()
    assert driver.proc.args[1:3] == ["clang", "src/k.c"] and (tmp_path / "kd.o").read_bytes() == direct

    real = zig_direct.Probe.instantiate      # a direct command that fails where zig cc succeeds
    monkeypatch.setattr(zig_direct.Probe, "instantiate", lambda self, *a: [*real(self, *a), "-fno-such-flag"])
    again = zig.compile_object(source, tmp_path / "k2.o", [], "x86_64-linux-gnu", zig_cache, tmp_path / "zl")
    again.wait()
    assert again.proc.args[1] == "cc" and b"jitflow_twice" in (tmp_path / "k2.o").read_bytes()
    bad = _c_file(tmp_path, "int broken( {\n")
    with pytest.raises(CompileError) as failed:
        zig.compile_object(bad, tmp_path / "b.o", [], "x86_64-linux-gnu", zig_cache, tmp_path / "zl").wait()
    assert "src/k.c:1:" in failed.value.log and " cc " in str(failed.value.command)    # zig cc has the last word


def test_a_link_runs_zigs_linker_directly_and_gives_zig_ccs_bytes(tmp_path, zig_cache, monkeypatch):
    from jitflow.toolchain.zig_cc import link, zig

    objects = []
    for n, text in enumerate(["int jitflow_a(int x) { return x + 1; }\n", "int jitflow_b(int x) { return x * 3; }\n"]):
        source = tmp_path / f"p{n}.c"
        source.write_text(text)
        zig.compile_object(source, tmp_path / f"p{n}.o", [], "x86_64-linux-gnu", zig_cache, tmp_path / "zl").wait()
        objects.append(tmp_path / f"p{n}.o")
    ran = []
    real_job = zig.Job
    monkeypatch.setattr(zig, "Job", lambda *a, **k: ran.append(k.get("direct")) or real_job(*a, **k))
    link.link_shared(objects, tmp_path / "direct.so", "x86_64-linux-gnu", zig_cache, tmp_path / "zl")
    assert ran[-1] is not None and ran[-1][1] == "ld.lld"
    monkeypatch.setattr(zig, "_link_probe", lambda *a: None)
    link.link_shared(objects, tmp_path / "zigcc.so", "x86_64-linux-gnu", zig_cache, tmp_path / "zl")
    assert ran[-1] is None
    assert (tmp_path / "direct.so").read_bytes() == (tmp_path / "zigcc.so").read_bytes()
    defined, _ = elf_info.symbol_names((tmp_path / "direct.so").read_bytes())
    assert {"jitflow_a", "jitflow_b"} <= defined


TVM_C = """// tvm target: c
#define TVM_EXPORTS
#include "tvm/runtime/base.h"
#include "tvm/ffi/c_api.h"
#include <math.h>
int jitflow_sqrt_plus(float x) { return (int)sqrtf(x) + TVM_FFI_VERSION_MAJOR; }
"""


def test_tvms_headers_are_precompiled_once_and_a_bad_header_is_made_again(tmp_path, monkeypatch):
    from jitflow.builder.steps import _include_dirs
    from jitflow.toolchain.zig_cc import zig, zig_pch

    own_zig_cache = tmp_path / "zig"          # this test damages what it makes: not the machine's folder
    own_zig_cache.mkdir()
    source = _c_file(tmp_path, TVM_C)

    def compiled(name):
        job = zig.compile_object(source, tmp_path / name, _include_dirs(), "x86_64-linux-gnu", own_zig_cache,
                                 tmp_path / "zl")
        job.wait()
        return job.proc.args, (tmp_path / name).read_bytes()

    monkeypatch.setattr(zig_pch, "_asked", {})            # a process that has not compiled TVM's C yet
    firsts = [compiled(f"first{n}.o") for n in range(zig_pch.MAKE_AFTER - 1)]    # a one-off build waits for no header
    assert all(a[1] == "-cc1" and "-include-pch" not in a for a, _ in firsts)
    assert not list(own_zig_cache.glob(f"{zig_pch.FOLDER}/*.pch"))
    args, with_header = compiled("a.o")                   # a process that compiles it again and again makes it
    headers = list((own_zig_cache / zig_pch.FOLDER).glob("*.pch"))
    assert len(headers) == 1 and args[1] == "-cc1" and args[2:4] == ["-include-pch", str(headers[0])]
    assert all(made == with_header for _, made in firsts)      # the same object bytes without it
    assert compiled("b.o")[1] == with_header and list((own_zig_cache / zig_pch.FOLDER).glob("*.pch")) == headers
    headers[0].write_bytes(b"CPCH and then damage")   # looks like one to jitflow, not to clang
    args, after_damage = compiled("c.o")               # the direct compile fails: zig cc compiles it
    assert args[1] == "cc" and b"jitflow_sqrt_plus" in after_damage and not headers[0].exists()
    args, again = compiled("d.o")
    assert args[2] == "-include-pch" and headers[0].is_file() and again == with_header
    headers[0].write_bytes(b"not a precompiled header")   # not one at all: never given to clang, made again
    args, remade = compiled("f.o")
    assert args[2] == "-include-pch" and headers[0].read_bytes()[:4] == b"CPCH" and remade == with_header
    monkeypatch.setattr(zig, "_header", lambda *a, **k: None)
    args, without = compiled("e.o")
    assert "-include-pch" not in args and without == with_header    # the same object bytes


def test_one_process_compiles_with_two_zig_caches_each_with_its_own_header(tmp_path, monkeypatch):
    """A process that builds with two zig caches (JITFLOW_ZIG_CACHE_DIR changed, a test's own folder)
    makes and uses a precompiled header in each; one known in the first is never taken for the second."""
    from jitflow.builder.steps import _include_dirs
    from jitflow.toolchain.zig_cc import zig, zig_pch

    source = _c_file(tmp_path, TVM_C)
    monkeypatch.setattr(zig_pch, "MAKE_AFTER", 1)          # made on the first compile
    for name in ("first", "second"):
        cache = tmp_path / name
        cache.mkdir()
        job = zig.compile_object(source, tmp_path / f"{name}.o", _include_dirs(), "x86_64-linux-gnu", cache,
                                 tmp_path / "zl")
        job.wait()
        (header,) = (cache / zig_pch.FOLDER).glob("*.pch")
        assert job.proc.args[2:4] == ["-include-pch", str(header)]
    assert (tmp_path / "first.o").read_bytes() == (tmp_path / "second.o").read_bytes()


def test_a_source_that_fails_to_compile_leaves_the_precompiled_header(tmp_path, monkeypatch):
    """A compile error of the source's own (zig cc fails on it too) is not the header's fault: the
    header other builds are using stays (it was thrown away, and their compiles failed meanwhile)."""
    from jitflow.builder.steps import _include_dirs
    from jitflow.errors import CompileError
    from jitflow.toolchain.zig_cc import zig, zig_pch

    cache = tmp_path / "zig"
    cache.mkdir()
    monkeypatch.setattr(zig_pch, "MAKE_AFTER", 1)
    good, bad = _c_file(tmp_path, TVM_C), tmp_path / "bad.c"
    bad.write_text(TVM_C + "\n#error this source is broken\n")
    zig.compile_object(good, tmp_path / "good.o", _include_dirs(), "x86_64-linux-gnu", cache, tmp_path / "zl").wait()
    (header,) = (cache / zig_pch.FOLDER).glob("*.pch")
    job = zig.compile_object(bad, tmp_path / "bad.o", _include_dirs(), "x86_64-linux-gnu", cache, tmp_path / "zl")
    assert job.proc.args[2:4] == ["-include-pch", str(header)]
    with pytest.raises(CompileError, match="this source is broken"):
        job.wait()
    assert header.is_file() and header.read_bytes()[:4] == b"CPCH"


def test_headers_installed_again_at_the_same_path_get_a_header_of_their_own(tmp_path, monkeypatch):
    """A virtual environment made again where it was (the same include path, new files): the header
    made from the old files is not given to clang, which would refuse it on every compile."""
    import shutil
    import time

    from jitflow.toolchain.zig_cc import zig, zig_pch

    cache = tmp_path / "zig"
    cache.mkdir()
    monkeypatch.setattr(zig_pch, "MAKE_AFTER", 1)
    source = _c_file(tmp_path, '#include "mine.h"\nint f(int x) { return x + MINE; }\n')
    headers = []
    for n in range(2):
        include = tmp_path / "site" / "include"
        shutil.rmtree(include.parent, ignore_errors=True)
        include.mkdir(parents=True)
        (include / "mine.h").write_text("#define MINE 3\n")
        os.utime(include / "mine.h", (time.time() + n * 5000, time.time() + n * 5000))
        job = zig.compile_object(source, tmp_path / f"k{n}.o", [str(include)], "x86_64-linux-gnu", cache,
                                 tmp_path / "zl")
        job.wait()
        assert job.proc.args[1] == "-cc1" and job.proc.args[2] == "-include-pch"   # direct, with a header
        headers.append(job.proc.args[3])
    assert headers[0] != headers[1]
    assert (tmp_path / "k0.o").read_bytes() == (tmp_path / "k1.o").read_bytes()


def _release(fifo):
    """Let a reader blocked on `fifo` go on (it reads an empty file)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_a_fifo_in_place_of_the_directives_file_is_replaced_not_read(tmp_path, monkeypatch):
    import threading

    from jitflow.builder.steps import _include_dirs
    from jitflow.toolchain.zig_cc import zig, zig_pch

    own_zig_cache = tmp_path / "zig"
    own_zig_cache.mkdir()
    source = _c_file(tmp_path, TVM_C)
    monkeypatch.setattr(zig_pch, "_asked", {})
    monkeypatch.setattr(zig_pch, "_known", set())
    probe = zig._compile_probe("x86_64-linux-gnu", tuple(f"-I{d}" for d in _include_dirs()), str(own_zig_cache),
                               None, ())
    made = zig._header(probe, source, own_zig_cache, make_now=True)
    directives = made.with_suffix(".h")
    text = directives.read_text()
    made.unlink()                                          # the header gone, a FIFO for its directives
    directives.unlink()
    os.mkfifo(directives)
    monkeypatch.setattr(zig_pch, "_known", set())
    monkeypatch.setattr(zig_pch, "_asked", {})
    runs = []

    def compile_all():
        for n in range(zig_pch.MAKE_AFTER + 1):           # the header is made on the MAKE_AFTER-th
            job = zig.compile_object(source, tmp_path / f"k{n}.o", _include_dirs(), "x86_64-linux-gnu",
                                     own_zig_cache, tmp_path / "zl")
            job.wait()
            runs.append(job.proc.args)

    worker = threading.Thread(target=compile_all, daemon=True)
    worker.start()
    worker.join(100)                                       # generous: each compile takes well under a second
    try:
        assert len(runs) == zig_pch.MAKE_AFTER + 1
        assert runs[-1][2:4] == ["-include-pch", str(made)] and made.read_bytes()[:4] == b"CPCH"
        assert stat.S_ISREG(directives.lstat().st_mode) and directives.read_text() == text
    finally:
        while worker.is_alive():
            _release(directives)
            worker.join(1)


def test_a_precompiled_header_is_made_within_the_builds_time_limit(tmp_path, monkeypatch):
    """Everything a build waits for ends at its deadline: here a header whose directives include a
    file that never ends (a FIFO), so that making the header would wait for its 120 s limit."""
    import time

    from jitflow.builder.host_c.compile import HostCompile
    from jitflow.builder.steps import _include_dirs
    from jitflow.errors import BuildTimeoutError
    from jitflow.toolchain.zig_cc import zig_pch
    from jitflow.toolchain.deadline import Deadline

    own_zig_cache = tmp_path / "zig"
    (own_zig_cache / zig_pch.FOLDER).mkdir(parents=True, mode=0o700)
    text = '#define TVM_EXPORTS\n#include "jitflow_endless.h"\nint jitflow_late(void) { return 1; }\n'
    source = _c_file(tmp_path, text)
    fifos = [own_zig_cache / zig_pch.FOLDER / "jitflow_endless.h", source.parent / "jitflow_endless.h"]
    for fifo in fifos:
        os.mkfifo(fifo)
    monkeypatch.setattr(zig_pch, "MAKE_AFTER", 1)          # this compile makes the header
    monkeypatch.setattr(zig_pch, "_asked", {})
    monkeypatch.setattr(zig_pch, "_known", set())
    out = tmp_path / "objects"
    out.mkdir()
    started = time.monotonic()
    compile = HostCompile(source, text, out, _include_dirs(), "x86_64-linux-gnu", own_zig_cache, tmp_path / "zl",
                          jobs=1, pieces=1, deadline=Deadline.after(3))
    try:
        with pytest.raises(BuildTimeoutError):
            compile.wait()
        assert time.monotonic() - started < 60               # the limit is 3 s; making the header alone took 120
    finally:
        for fifo in fifos:
            _release(fifo)


@pytest.mark.slow
def test_asking_zig_for_its_command_ends_at_the_builds_time_limit(tmp_path, monkeypatch):
    """A build does not wait past its deadline for zig to say what it runs (zig busy in its cache
    lock, say): it compiles through zig cc, bounded by the deadline, and the answer comes later."""
    import subprocess
    import time

    from jitflow.toolchain.zig_cc import zig, zig_direct
    from jitflow.toolchain.deadline import Deadline

    own_zig_cache = tmp_path / "zig"
    own_zig_cache.mkdir()
    real = zig_direct.probe_compile
    slow = subprocess.Popen(["sleep", "120"])

    def stuck(*args):
        slow.wait()                                        # until the test ends it
        return real(*args)

    monkeypatch.setattr(zig_direct, "probe_compile", stuck)
    zig._compile_probe.cache_clear()
    source = _c_file(tmp_path, "int jitflow_in_time(int x) { return x - 1; }\n")
    started = time.monotonic()
    try:
        deadline = Deadline.after(8)                       # 4 s for the probe, 4 s for zig cc
        job = zig.compile_object(source, tmp_path / "k.o", [], "x86_64-linux-gnu", own_zig_cache, tmp_path / "zl",
                                 deadline=deadline)
        job.wait(deadline)
        assert job.proc.args[1] == "cc" and b"jitflow_in_time" in (tmp_path / "k.o").read_bytes()
        assert time.monotonic() - started < 60              # the probe alone would have taken 120 s
    finally:
        slow.kill()
        slow.wait()
        zig._compile_probe.cache_clear()
