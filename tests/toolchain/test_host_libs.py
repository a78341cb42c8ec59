"""Linking without zig's C library and compiler runtime: what the library binds to at load time, its
constructors, the half-precision builtins, and the fallback to zig's compiler runtime."""
from __future__ import annotations

import ctypes
import os
import shutil
import stat
import threading

import numpy as np
import pytest
from conftest import run_python

from jitflow.formats import elf as elf_info
from jitflow.toolchain.zig_cc import host_libs, link, zig

HOST = "x86_64-linux-gnu"


def _objects(folder, zig_cache, **sources):
    objects = []
    for name, text in sources.items():
        (folder / f"{name}.c").write_text(text)
        zig.compile_object(folder / f"{name}.c", folder / f"{name}.o", [], HOST, zig_cache, folder).wait()
        objects.append(folder / f"{name}.o")
    return objects


def _library(folder, zig_cache, **sources):
    out = folder / "lib.so"
    link.link_shared(_objects(folder, zig_cache, **sources), out, HOST, zig_cache, folder)
    return out


ADDRESSES = """
#include <math.h>
#include <string.h>
void* address_of_expf(void) { return (void*)&expf; }
void* address_of_memcpy(void) { return (void*)&memcpy; }
"""


def test_unversioned_references_bind_to_glibcs_oldest_versions(tmp_path, zig_cache):
    lib = _library(tmp_path, zig_cache, addresses=ADDRESSES)
    info = elf_info.read(lib)
    assert info.needed == ["libc.so.6", "libm.so.6"] and info.glibc_baseline is None
    # expf@GLIBC_2.27 and memcpy@GLIBC_2.14 are the defaults a new link would pick; a library built
    # against glibc 2.17 gets the GLIBC_2.2.5 ones, and so does this one.
    out = run_python(f"""
        import ctypes
        lib = ctypes.CDLL({str(lib)!r})
        dl = ctypes.CDLL("libdl.so.2")
        dl.dlvsym.restype = ctypes.c_void_p
        dl.dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        for fn, soname, old, new in [("expf", "libm.so.6", "GLIBC_2.2.5", "GLIBC_2.27"),
                                     ("memcpy", "libc.so.6", "GLIBC_2.2.5", "GLIBC_2.14")]:
            getattr(lib, "address_of_" + fn).restype = ctypes.c_void_p
            bound = getattr(lib, "address_of_" + fn)()
            handle = ctypes.CDLL(soname)._handle
            print(fn, bound == dl.dlvsym(handle, fn.encode(), old.encode()),
                  bound == dl.dlvsym(handle, fn.encode(), new.encode()))
    """)
    assert out.stdout.split() == ["expf", "True", "False", "memcpy", "True", "False"]


def test_constructors_run(tmp_path, zig_cache):
    lib = _library(tmp_path, zig_cache, ctor="""
        #include <stdlib.h>
        #include <string.h>
        static int seen = -1;
        __attribute__((constructor)) static void setup(void) {
            const char* v = getenv("JITFLOW_TEST_CTOR");
            seen = v ? (int)strlen(v) : 0;
        }
        int constructor_saw(void) { return seen; }
    """)
    out = run_python(f"import ctypes; print(ctypes.CDLL({str(lib)!r}).constructor_saw())",
                     env={"JITFLOW_TEST_CTOR": "abcde"})
    assert out.stdout.strip() == "5"


HALF = """
typedef unsigned short u16;
void from_float(const float* x, u16* out, long n) {
    for (long i = 0; i < n; i++) { _Float16 h = (_Float16)x[i]; __builtin_memcpy(out + i, &h, 2); }
}
void from_double(const double* x, u16* out, long n) {
    for (long i = 0; i < n; i++) { _Float16 h = (_Float16)x[i]; __builtin_memcpy(out + i, &h, 2); }
}
void to_float(const u16* x, float* out, long n) {
    for (long i = 0; i < n; i++) { _Float16 h; __builtin_memcpy(&h, x + i, 2); out[i] = h; }
}
"""


def _same(bits, expected):
    return (bits == expected.view(np.uint16)) | (np.isnan(bits.view(np.float16)) & np.isnan(expected))


def test_half_conversions_match_ieee_rounding(tmp_path, zig_cache):
    objects = _objects(tmp_path, zig_cache, half=HALF)
    assert host_libs.undefined_symbols(objects) >= {"__extendhfsf2", "__truncsfhf2", "__truncdfhf2"}
    assert host_libs.needed_builtins(objects)[1] == set()       # all three come from builtins_c
    out = tmp_path / "half.so"
    link.link_shared(objects, out, HOST, zig_cache, tmp_path)
    assert not {"__extendhfsf2", "__truncsfhf2"} & set(elf_info.read(out).exported)   # used, not exported
    lib = ctypes.CDLL(str(out))
    arg = np.ctypeslib.ndpointer
    lib.from_float.argtypes = [arg(np.float32), arg(np.uint16), ctypes.c_long]
    lib.from_double.argtypes = [arg(np.float64), arg(np.uint16), ctypes.c_long]
    lib.to_float.argtypes = [arg(np.uint16), arg(np.float32), ctypes.c_long]

    every_half = np.arange(1 << 16, dtype=np.uint16)
    widened = np.zeros(1 << 16, np.float32)
    lib.to_float(every_half, widened, len(every_half))
    expected = every_half.view(np.float16).astype(np.float32)
    assert ((widened.view(np.uint32) == expected.view(np.uint32)) | np.isnan(expected)).all()
    assert np.isnan(widened[np.isnan(expected)]).all()

    rng = np.random.default_rng(0)
    finite = np.unique(expected[np.isfinite(expected)].astype(np.float64))
    ties = (finite[:-1] + finite[1:]) / 2                         # exactly between two halves
    near = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    edges = [65504, 65519.99, 65520, 65536, 1e30, np.inf, -np.inf, np.nan, 2**-24, 2**-25, 3 * 2**-26, 1e-30, -0.0]
    with np.errstate(over="ignore"):
        floats = np.concatenate([expected, near.astype(np.float32), np.float32(edges),
                                 rng.integers(0, 1 << 32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)])
        doubles = np.concatenate([finite, near, edges, rng.standard_normal(300_000) * 1000.0,
                                  rng.integers(0, 1 << 63, 300_000, dtype=np.uint64).view(np.float64)])
        for fn, values in ((lib.from_float, floats), (lib.from_double, doubles)):
            bits = np.zeros(len(values), np.uint16)
            fn(values, bits, len(values))
            assert _same(bits, values.astype(np.float16)).all(), values[~_same(bits, values.astype(np.float16))][:5]


def test_other_builtins_bring_in_zigs_compiler_runtime(tmp_path, zig_cache):
    source = "__int128 quotient(__int128 a, __int128 b) { return a / b; }\n" \
             "long long divide(long long hi, long long d) { return (long long)(((__int128)hi << 64) / d); }\n"
    objects = _objects(tmp_path, zig_cache, wide=source)
    assert host_libs.needed_builtins(objects) == (set(), {"__divti3"})
    out = tmp_path / "wide.so"
    link.link_shared(objects, out, HOST, zig_cache, tmp_path)
    lib = ctypes.CDLL(str(out))
    lib.divide.restype = ctypes.c_longlong
    lib.divide.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
    assert lib.divide(3, 1 << 62) == 12                            # (3 << 64) / 2**62
    assert elf_info.read(out).needed == ["libc.so.6", "libm.so.6"]


def test_symbols_read_like_a_general_elf_reader_and_across_objects(tmp_path, zig_cache):
    from elftools.elf.elffile import ELFFile

    from jitflow.formats import elf

    user = "float __helper_b(float);\nfloat expf(float);\nfloat user(float x) { return expf(__helper_b(x)); }\n"
    helper = "float __helper_b(float x) { return x * 2.0f; }\n_Float16 h(float x) { return x; }\n"
    objects = _objects(tmp_path, zig_cache, a=user, b=helper)
    for path in objects:
        with open(path, "rb") as f:
            symbols = [s for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols() if s.name]
        expected = ({s.name for s in symbols if s["st_shndx"] != "SHN_UNDEF"},
                    {s.name for s in symbols if s["st_shndx"] == "SHN_UNDEF"})
        assert elf.symbol_names(path.read_bytes()) == expected
    assert host_libs.undefined_symbols(objects) == {"expf", "__truncsfhf2"}   # __helper_b: defined in b.o
    assert host_libs.needed_builtins(objects) == ({"__truncsfhf2"}, set())


def test_compiler_runtime_names_come_from_zigs_sources():
    names = host_libs.compiler_rt_symbols()
    assert {"__divti3", "__extendhfsf2", "__truncsfhf2", "__popcountdi2"} <= names
    assert not {"expf", "memcpy", "__memcpy_chk", "__stack_chk_fail"} & names    # the C library's


@pytest.mark.parametrize("host", ["x86_64-linux-gnu", "aarch64-linux-gnu"])
def test_stub_libraries_carry_only_a_soname(host, zig_cache):
    for stub in host_libs.stubs(host, zig_cache):
        info = elf_info.read(stub)
        assert info.needed == [] and info.exported == [] and info.machine == host.split("-")[0]


def test_a_damaged_stub_in_zigs_cache_is_made_again(tmp_path):
    zig_cache = tmp_path / "zig"
    first = host_libs.stubs(HOST, zig_cache)
    good = first[0].read_bytes()
    first[0].write_bytes(good[:-8] + b"\xff" * 8)           # a flipped tail, as a bad disk or a tamperer leaves
    again = host_libs.stubs(HOST, zig_cache)
    assert again == first and again[0].read_bytes() == good
    (again[1].parent / host_libs.MANIFEST).unlink()          # no manifest: not trusted either
    assert host_libs.stubs(HOST, zig_cache)[1].read_bytes() == again[1].read_bytes()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("how", ["a link", "another user's", "a FIFO manifest", "a linked folder",
                                 "a linked parent folder"])
def test_a_stub_not_as_jitflow_made_it_is_made_again(tmp_path, how):
    """The same bytes are not enough: a kept file linked into every library must be a regular file
    of this user in a folder of this user; a FIFO manifest must not hang the link."""
    zig_cache = tmp_path / "zig"
    first = host_libs.stubs(HOST, zig_cache)
    good = first[0].read_bytes()
    folder = first[0].parent
    if how == "a link":
        copy = tmp_path / "elsewhere.so"
        copy.write_bytes(good)
        first[0].unlink()
        first[0].symlink_to(copy)
    elif how == "another user's":
        os.chown(first[0], 65534, 65534)
    elif how == "a FIFO manifest":
        (folder / host_libs.MANIFEST).unlink()
        os.mkfifo(folder / host_libs.MANIFEST)
    else:                                                   # the folder, or one above it, a link to a copy
        linked = folder if how == "a linked folder" else zig_cache / "jitflow-host-libs"
        copy = tmp_path / "elsewhere"
        shutil.copytree(linked, copy)
        shutil.rmtree(linked)
        linked.symlink_to(copy)
    done = []
    worker = threading.Thread(target=lambda: done.append(host_libs.stubs(HOST, zig_cache)), daemon=True)
    worker.start()
    worker.join(120)
    try:
        assert done == [first]
        assert not any(p.is_symlink() for p in (folder, folder.parent, folder.parent.parent))
        for path in (first[0], folder / host_libs.MANIFEST):
            st = path.lstat()
            assert stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
        assert first[0].read_bytes() == good
    finally:
        if worker.is_alive():
            os.close(os.open(folder / host_libs.MANIFEST, os.O_WRONLY | os.O_NONBLOCK))
