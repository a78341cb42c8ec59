"""Every reader of library bytes turns malformed input into the report's "unreadable" note or a
LoadError: no traceback, no signal, no hang.

The libraries are C and CUDA kernels and models, changed on purpose and re-sealed (their digest
record written again over the changed bytes, tests/resealed.py), so that the digest holds and the
readers behind it meet the changes: `jitflow inspect` (text, JSON, the kernel table) and every
check `jitflow.load` makes before the dynamic loader sees the file (runtime.load.check_loadable,
with a simulated sm_90 GPU so that the device code is read too). A change confined to bytes the
dynamic loader never reads (sections outside the loaded segments, the section header table) is
loaded for real as well. What the dynamic loader and TVM do with changed code and relocations is
not a reader's to judge: a re-sealed library is one whose bytes its builder vouches for.

Each trial runs in a forked child of one fresh interpreter, with an alarm: a crash shows up as a
signal and a hang as the alarm, instead of killing or stalling the test.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import kernels
import models
import pytest
import resealed
from conftest import ROOT, TESTS, cache_at, run_python

import jitflow
from jitflow.errors import LoadError
from jitflow.runtime import compat
from jitflow.runtime.load import check_loadable

SOAK = bool(os.environ.get("JITFLOW_SOAK"))
GPU = compat.SimulatedGpu("sm_90", "13.0")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory, zig_cache, shared_cache):
    """A C kernel, a C model, a CUDA kernel for two archs and a CUDA model, exported."""
    folder = tmp_path_factory.mktemp("resealed")
    with cache_at(shared_cache, zig_cache):
        built = {"c_kernel": jitflow.compile(kernels.axpb(3.0, n=64), "c"),
                 "c_model": jitflow.compile(models.mlp(), "c"),
                 "cuda_kernel": jitflow.compile(kernels.vecadd_cuda(), "cuda", arch=["sm_80", "sm_90"]),
                 "cuda_model": jitflow.compile(models.symbolic_mlp(), "cuda", arch="sm_90")}
        return {name: exe.export_library(folder / f"{name}.so") for name, exe in built.items()}


def _inspect(path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "jitflow", "inspect", str(path)], capture_output=True, text=True,
                          env=env, timeout=120)


def _changed(source, dest, change) -> object:
    """A copy of `source` with `change(bytearray)` applied before its record, re-sealed."""
    good = source.read_bytes()
    fields = resealed.record(good).fields
    body = bytearray(good[:resealed.record(good).covered])
    change(body)
    return resealed.reseal(dest, bytes(body), fields)


def test_a_dynamic_section_of_another_type_is_an_unreadable_note_and_still_loads(libraries, tmp_path):
    good = libraries["c_kernel"].read_bytes()
    at = resealed.section_header(good, ".dynamic") + 4          # sh_type: SHT_DYNAMIC (6) -> SHT_PROGBITS (1)
    lib = _changed(libraries["c_kernel"], tmp_path / "typed.so", lambda b: b.__setitem__(slice(at, at + 4),
                                                                                         struct.pack("<I", 1)))
    proc = _inspect(lib)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "unreadable: the ELF tables (CPU, glibc baseline, exports): its .dynamic section is of type" in proc.stdout
    out = run_python(f"""
        import numpy as np, jitflow
        a, c = np.ones(64, "float32"), np.zeros(64, "float32")
        jitflow.load({str(lib)!r})["main"](a, c)       # the dynamic loader reads the segments, not the sections
        print(c[0])
    """)
    assert out.stdout.split() == ["4.0"]


def _fatbin_entries(data: bytes) -> list[int]:
    """The offsets of the entry headers of the first fatbin in `data`."""
    at = data.find(resealed.FATBIN_MAGIC)
    header_size, total = struct.unpack_from("<HQ", data, at + 6)
    cur, end, found = at + header_size, at + header_size + total, []
    while cur + 40 <= end:
        found.append(cur)
        ehdr, size = struct.unpack_from("<IQ", data, cur + 4)
        cur += ehdr + size
    return found


def test_a_fatbin_entry_naming_no_arch_is_an_unreadable_note_and_a_load_error(libraries, tmp_path):
    good = libraries["cuda_kernel"].read_bytes()
    arch_at = _fatbin_entries(good)[0] + 28                    # the entry's arch number (80): one byte changed
    lib = _changed(libraries["cuda_kernel"], tmp_path / "arch.so", lambda b: b.__setitem__(arch_at + 2, 0x7F))
    proc = _inspect(lib)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "unreadable: the fatbin of device module 1: a fatbin entry names arch" in proc.stdout
    with pytest.raises(LoadError, match="its device code cannot be read"):
        check_loadable(lib, GPU)


def test_a_cubin_with_a_huge_offset_is_an_unreadable_note(libraries, tmp_path):
    good = libraries["cuda_kernel"].read_bytes()
    cubin_at = good.find(b"\x7fELF", 1)
    lib = _changed(libraries["cuda_kernel"], tmp_path / "offset.so",
                   lambda b: b.__setitem__(slice(cubin_at + 40, cubin_at + 48), (2 ** 63 + 5).to_bytes(8, "little")))
    proc = _inspect(lib)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "unreadable: the sm_80 cubin of device module 1: a cubin in the fatbin is not readable" in proc.stdout
    assert "main_kernel" in proc.stdout                          # the rest of the report stands
    check_loadable(lib, GPU)                                      # what a load reads of it still reads


TRIALS = """
    import contextlib, io, json, os, random, shutil, signal, traceback
    import jitflow, resealed
    import jitflow.cli.inspect, jitflow.report.gather           # imported once, before the children fork
    from jitflow.cli.main import main
    from jitflow.errors import LoadError
    from jitflow.runtime import compat, tvm_runtime
    from jitflow.runtime.load import check_loadable
    tvm_runtime.ensure_runtime()
    GPU = compat.SimulatedGpu("sm_90", "13.0")
    ARGS = (["inspect"], ["inspect", "--json"], ["inspect", "--section", "kernels"])

    def last(text):
        lines = text.strip().splitlines()
        return lines[-1][:300] if lines else ""

    def trial(path, part, cuda):
        signal.alarm(60)                     # a hang ends as SIGALRM
        seen = []
        for args in ARGS:
            err = io.StringIO()
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    code = main([args[0], path, *args[1:]])
            except BaseException:
                seen.append(f"inspect {{args[1:]}} raised: {{last(traceback.format_exc())}}")
                continue
            if code not in (0, 2) or "Traceback" in err.getvalue():
                seen.append(f"inspect {{args[1:]}} exit {{code}}: {{last(err.getvalue())}}")
        try:
            check_loadable(path, GPU)
        except LoadError:
            pass
        except BaseException:
            seen.append(f"the checks before dlopen raised: {{last(traceback.format_exc())}}")
        if part in resealed.UNLOADED and not cuda:      # bytes the dynamic loader never reads
            try:
                jitflow.load(path)
            except LoadError:
                pass
            except BaseException:
                seen.append(f"load raised: {{last(traceback.format_exc())}}")
        return seen

    problems, outcomes = [], {{}}
    for name, source in {libraries!r}.items():
        good, rng = open(source, "rb").read(), random.Random({seed} + len(name))
        fields = resealed.record(good).fields
        for n in range({trials}):
            body, part = resealed.mutated(good, rng)
            path = os.path.join({folder!r}, f"{{name}}-{{n}}.so")
            with open(path, "wb") as f:
                f.write(body)
            resealed.library_digest.seal(path, fields)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    result = trial(path, part, name.startswith("cuda"))
                except BaseException:
                    result = [f"the trial raised: {{last(traceback.format_exc())}}"]
                os.write(write, json.dumps(result).encode())
                os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as pipe:
                reply = pipe.read()
            status = os.waitpid(pid, 0)[1]
            if os.WIFSIGNALED(status):
                seen = [f"died of signal {{os.WTERMSIG(status)}}" + (" (a hang)" if os.WTERMSIG(status) == 14 else "")]
            else:
                seen = json.loads(reply or b'["no reply"]')
            outcome = "problem" if seen else "clean"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if seen:
                problems.append({{"library": name, "trial": n, "part": part, "seen": seen}})
                shutil.copyfile(path, path + ".kept")
            os.unlink(path)
    print(json.dumps({{"outcomes": outcomes, "problems": problems}}))
"""


@pytest.mark.parametrize("trials", [pytest.param(3, id="quick"),
                                    pytest.param(150 if SOAK else 12, id="soak", marks=pytest.mark.slow)])
def test_changed_and_resealed_libraries_are_notes_or_load_errors(libraries, tmp_path, trials):
    code = TRIALS.format(libraries={k: str(v) for k, v in libraries.items()}, seed=2024 + trials, trials=trials,
                         folder=str(tmp_path))
    proc = run_python(code, timeout=max(300, trials * 4 * 20))
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["problems"] == [], json.dumps(found["problems"], indent=1)
    assert found["outcomes"] == {"clean": trials * len(libraries)}


CRAFTED = """
    import json, jitflow
    from jitflow.errors import LoadError
    from jitflow.runtime import compat
    from jitflow.runtime.load import check_loadable
    out = {{}}
    for name, path in {cases!r}.items():
        try:
            check_loadable(path, compat.SimulatedGpu("sm_90", "13.0"))
            out[name] = "passed"
        except LoadError as exc:
            out[name] = str(exc)
    print(json.dumps(out))
"""


def test_crafted_digest_records_are_never_believed(libraries, tmp_path):
    from jitflow.formats import library_digest

    kernel, cuda = libraries["c_kernel"].read_bytes(), libraries["cuda_kernel"].read_bytes()
    k, c = resealed.record(kernel), resealed.record(cuda)
    header = lambda length, covered: library_digest.HEADER.pack(library_digest.MAGIC, 1, length, covered)  # noqa: E731
    cases = {
        # the header: a body longer than any record, a covered length past the end (not re-sealed: the tail as is)
        "huge length": kernel[:k.covered + k.length] + header(2 ** 32 - 1, k.covered) + k.digest,
        "huge covered": kernel[:k.covered + k.length] + header(k.length, 2 ** 63) + k.digest,
        # a record copied from another library, as it was: its digest is the other library's
        "copied": kernel[:k.covered] + cuda[c.covered:],
    }
    paths = {name: str(tmp_path / f"{name.replace(' ', '_')}.so") for name in cases}
    for name, data in cases.items():
        (tmp_path / f"{name.replace(' ', '_')}.so").write_bytes(data)
    # re-sealed bodies: wrong types, deep nesting, another library's statements
    bodies = {"needs a string": dict(k.fields, needs="cuda"), "needs numbers": dict(k.fields, needs=[1, 2]),
              "cpu a string": dict(k.fields, cpu="x86-64"), "deep": dict(k.fields, extra=[[[[[[[[[[0]]]]]]]]]]),
              "claims SASS it lacks": dict(c.fields, cuda=dict(c.fields["cuda"], sass=["sm_90", "sm_100"])),
              "another library's record": c.fields}
    for name, fields in bodies.items():
        source = cuda if name == "claims SASS it lacks" else kernel
        path = tmp_path / f"{name.replace(' ', '_')}.so"
        resealed.reseal(path, source[:resealed.record(source).covered], fields)
        paths[name] = str(path)
    deep = tmp_path / "deeper.so"                       # nesting far past the parser's own limit, in 64 KiB
    deep.write_bytes(kernel[:k.covered])
    body = b'{"needs": ' + b"[" * 30000 + b"]" * 30000 + b"}"
    with open(deep, "ab") as f:
        f.write(body + library_digest.HEADER.pack(library_digest.MAGIC, 1, len(body), k.covered))
    import hashlib

    with open(deep, "ab") as f:
        f.write(hashlib.sha256(deep.read_bytes()).digest())
    paths["deeper"] = str(deep)
    seen = json.loads(run_python(CRAFTED.format(cases=paths)).stdout.splitlines()[-1])
    expected = {"huge length": "its digest record is damaged (version 1, body of 4294967295 bytes",
                "huge covered": "its digest record is damaged (version 1",
                "copied": "its digest record is damaged (version 1, body of",
                "needs a string": "what it needs of the TVM runtime is not a list of names",
                "needs numbers": "what it needs of the TVM runtime is not a list of names",
                "cpu a string": "the CPU features it needs are not a list of names",
                "deep": "its body nests deeper than 8 levels",
                "deeper": "its body nests deeper than 8 levels",
                "claims SASS it lacks": "its digest record states SASS for sm_90, sm_100",
                "another library's record": "its digest record states SASS for sm_80, sm_90"}
    for name, words in expected.items():
        assert words in seen[name], (name, seen[name])
    assert "and the library carries no fatbin" in seen["another library's record"]
