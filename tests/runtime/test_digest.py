"""Every library carries the sha256 of its own bytes, and jitflow.load checks it before dlopen: a changed
byte anywhere (the digest record included) is a LoadError naming the file, never a crash. A damaged
record never passes as an older library without one; older libraries and TVM's own still load.

Flipped libraries are loaded in forked children of a fresh interpreter (one child per trial), so a
crash shows up as a signal instead of killing the test."""
from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import random
import subprocess
import sys

import kernels
import numpy as np
import pytest
import resealed
from conftest import module_cache, run_python

import jitflow
from jitflow.errors import LoadError
from jitflow.formats import library_digest
from jitflow.runtime import ffi_abi
from jitflow.toolchain import versions

SOAK = bool(os.environ.get("JITFLOW_SOAK"))
TRIALS = 300 if SOAK else 36


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """A CPU kernel's cache entry and its export."""
    with module_cache(tmp_path_factory, zig_cache):
        exe = jitflow.compile(kernels.axpb(7.0, n=64), "c")
        path = exe.export_library(tmp_path_factory.mktemp("digest") / "axpb.so")
        return exe.build_info.library, path


def _record(data: bytes) -> library_digest.Record:
    return library_digest.read(lambda at, n: data[at:at + n], len(data))


def _works(path) -> bool:
    a, out = np.ones(64, "float32"), np.zeros(64, "float32")
    jitflow.load(path)["main"](a, out)
    return bool(np.all(out == 8.0))


def test_a_cache_entry_and_its_export_are_the_same_bytes_and_the_digest_holds(built):
    entry, exported = built
    data = exported.read_bytes()
    assert entry.read_bytes() == data
    record = _record(data)
    assert record.version == library_digest.VERSION
    assert record.fields == {"needs": [], "cpu": {"level": "x86-64", "needs": []},
                             "tvm_ffi": importlib.metadata.version("apache-tvm-ffi")}
    assert record.covered + record.length + library_digest.TAIL == len(data)
    import hashlib

    assert hashlib.sha256(data[:-library_digest.DIGEST_SIZE]).digest() == record.digest
    assert b"\0" + library_digest.SECTION.encode() + b"\0" in data     # said inside the ELF too
    assert _works(exported)


def test_a_library_built_against_another_tvm_ffi_says_so_and_another_minor_version_is_refused(built, tmp_path,
                                                                                            caplog):
    """The record states the tvm-ffi the library was built against (the key names it too): another
    release of the same minor version loads with a warning naming both, another minor version is a
    LoadError before dlopen, a library whose record states none loads as before."""
    _, exported = built
    data = exported.read_bytes()
    record = _record(data)
    here = record.fields["tvm_ffi"]
    assert here == ffi_abi.installed() == versions.tvm_ffi() == importlib.metadata.version("apache-tvm-ffi")
    major, minor = ffi_abi.series(here)
    body = data[:record.covered]
    caplog.set_level(logging.INFO, logger="jitflow")

    patch = resealed.reseal(tmp_path / "patch.so", body, dict(record.fields, tvm_ffi=f"{major}.{minor}.999"))
    assert _works(patch)
    said = [r.getMessage() for r in caplog.records if "tvm-ffi" in r.getMessage()]
    assert len(said) == 1 and f"built against tvm-ffi {major}.{minor}.999 and is loaded by tvm-ffi {here}" in said[0]
    assert f"apache-tvm-ffi=={major}.{minor}.999" in said[0]

    for other in (f"{major}.{minor + 1}.0", f"{major + 1}.0.0"):
        refused = resealed.reseal(tmp_path / f"other-{other}.so", body, dict(record.fields, tvm_ffi=other))
        with pytest.raises(LoadError) as err:
            jitflow.load(refused)
        text = str(err.value)
        assert f"cannot load {refused}: it was built against tvm-ffi {other}, and this process has tvm-ffi" in text
        assert f"has tvm-ffi {here}, whose C ABI may differ" in text
        assert f"pip install apache-tvm-ffi=={other}" in text
        with open("/proc/self/maps") as maps:
            assert str(refused) not in maps.read()            # never mapped: the dynamic loader never saw it

    caplog.clear()
    older = resealed.reseal(tmp_path / "older.so", body, {k: v for k, v in record.fields.items() if k != "tvm_ffi"})
    assert _works(older) and not [r for r in caplog.records if "tvm-ffi" in r.getMessage()]


TRIAL_CHILDREN = """
    import json, os, random, sys
    import jitflow
    from jitflow.errors import LoadError
    from jitflow.runtime import tvm_runtime
    tvm_runtime.ensure_runtime()
    good = open({path!r}, "rb").read()
    record_at = {record_at}
    rng = random.Random({seed})
    outcomes = {{}}
    NAMES = {{0: "LoadError naming the file", 1: "loaded", 2: "LoadError not naming it", 4: "another error"}}
    for trial in range({trials}):
        data = bytearray(good)
        region = trial % 3       # anywhere, the first 4 KiB (the headers), the digest record
        low, high = [(0, len(data)), (0, 4096), (record_at, len(data))][region]
        for _ in range(rng.choice([1, 1, 2, 3, 8])):
            data[rng.randrange(low, high)] ^= 1 << rng.randrange(8)
        name = os.path.join({folder!r}, f"flip{{trial}}.so")
        open(name, "wb").write(data)
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                jitflow.load(name)
                code = 1
            except LoadError as exc:
                code = 0 if name in str(exc) else 2
            except BaseException:
                code = 4
            os._exit(code)
        status = os.waitpid(pid, 0)[1]
        code = os.waitstatus_to_exitcode(status)
        outcome = NAMES.get(code, f"died ({{code}})")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        os.unlink(name)
    print(json.dumps(outcomes))
"""


@pytest.mark.slow
def test_bit_flips_anywhere_are_load_errors_never_crashes(built, tmp_path):
    _, exported = built
    data = exported.read_bytes()
    record = _record(data)
    proc = run_python(TRIAL_CHILDREN.format(path=str(exported), record_at=record.covered, seed=1, trials=TRIALS,
                                            folder=str(tmp_path)))
    assert json.loads(proc.stdout.splitlines()[-1]) == {"LoadError naming the file": TRIALS}


LOAD_ONE = """
    import jitflow
    from jitflow.errors import LoadError
    try:
        jitflow.load({path!r})
        print("LOADED")
    except LoadError as exc:
        print("LoadError:", exc)
"""


def _load_elsewhere(path) -> str:
    proc = run_python(LOAD_ONE.format(path=str(path)), check=False)
    assert proc.returncode == 0, f"the loading process died ({proc.returncode}): {proc.stderr}"
    return proc.stdout.strip()


def test_a_damaged_record_never_passes_as_an_older_library(built, tmp_path):
    _, exported = built
    data = exported.read_bytes()
    record = _record(data)
    magic_at = len(data) - library_digest.TAIL
    blurred = bytearray(data)
    for bit in range(library_digest.MAX_FLIPPED_BITS):       # the magic blurred as far as it is still read
        blurred[magic_at + bit // 8] ^= 1 << (bit % 8)
    cases = {"blurred": bytes(blurred),
             "erased": data[:magic_at] + bytes(library_digest.TAIL),              # the tail zeroed
             "cut off": data[:record.covered]}                                     # the whole record gone
    for name, damaged in cases.items():
        (tmp_path / f"{name}.so").write_bytes(damaged)
        result = _load_elsewhere(tmp_path / f"{name}.so")
        assert result.startswith("LoadError:") and f"{name}.so" in result and "digest record" in result, (name, result)


def test_an_older_library_without_a_record_loads_with_the_header_checks(built, tmp_path):
    _, exported = built
    data = exported.read_bytes()
    older = data[:_record(data).covered].replace(library_digest.SECTION.encode(), b".comment.older.")
    (tmp_path / "older.so").write_bytes(older)
    assert _works(tmp_path / "older.so")
    (tmp_path / "older_cut.so").write_bytes(older[:len(older) // 2])
    assert "truncated" in _load_elsewhere(tmp_path / "older_cut.so")


def test_tvms_own_library_loads(tmp_path, zig_cache):
    import tvm

    from jitflow.toolchain.zig_cc import zig

    def zig_cc(output, objects, options=None, cc=None, **_):    # TVM's LLVM objects, linked by zig
        subprocess.run([zig.zig_binary(), "cc", "-shared", "-nostdlib", "-o", output, *objects], check=True,
                       capture_output=True, env=dict(os.environ, ZIG_GLOBAL_CACHE_DIR=str(zig_cache)))

    zig_cc.output_format = "so"
    tvm.compile(kernels.vecadd(64), "llvm").export_library(str(tmp_path / "tvm_vecadd.so"), fcompile=zig_cc)
    proc = run_python(f"""
        import sys, numpy as np, jitflow
        a, c = np.arange(64, dtype="float32"), np.zeros(64, "float32")
        jitflow.load({str(tmp_path / "tvm_vecadd.so")!r})["main"](a, a, c)
        assert (c == 2 * a).all()
        print("tvm" in sys.modules)
    """)
    assert proc.stdout.split() == ["False"]


def test_a_changed_byte_is_a_load_error_here_too(built, tmp_path):
    _, exported = built
    data = bytearray(exported.read_bytes())
    data[len(data) // 3] ^= 0x10
    (tmp_path / "changed.so").write_bytes(data)
    with pytest.raises(LoadError, match="changed.so.*changed since it was built"):
        jitflow.load(tmp_path / "changed.so")
    assert sys.modules.get("jitflow") is not None


def test_inspect_says_whether_the_digest_holds(built, tmp_path):
    from jitflow.report.gather import inspect_library

    _, exported = built
    data = bytearray(exported.read_bytes())
    assert inspect_library(exported).notes[0].startswith("digest: holds (sha256 ")
    data[100] ^= 1
    (tmp_path / "flipped.so").write_bytes(data)
    assert inspect_library(tmp_path / "flipped.so").notes[0] == (
        "digest: does not hold: it changed since it was built: its bytes do not match the sha256 it carries; "
        "build or copy it again")
    older = bytes(data[:_record(bytes(data)).covered]).replace(library_digest.SECTION.encode(), b".comment.older.")
    (tmp_path / "older.so").write_bytes(older)
    assert inspect_library(tmp_path / "older.so").notes[0].startswith("digest: none")
