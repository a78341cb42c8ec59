"""The commands zig runs, kept in zig's cache folder: a new process asks zig for none of them, a
damaged memo is asked for again, and a memo whose command fails where zig cc succeeds is forgotten."""
from __future__ import annotations

import json
import os
import stat
import threading

import pytest
from hostile_files import plant

HOST = "x86_64-linux-gnu"


@pytest.fixture
def own_zig_cache(tmp_path):
    """A zig cache of this test's own, and a process that has asked for no command yet."""
    from jitflow.toolchain.zig_cc import zig

    folder = tmp_path / "zig"
    folder.mkdir()
    zig._compile_probe.cache_clear()
    zig._link_probe.cache_clear()
    yield folder
    zig._compile_probe.cache_clear()
    zig._link_probe.cache_clear()


def _compile(tmp_path, zig_cache, name):
    from jitflow.toolchain.zig_cc import zig

    folder = tmp_path / name                 # the same file name each time: it is in the object
    folder.mkdir()
    source = folder / "k.c"
    source.write_text("int jitflow_memo(int x) { return x + 7; }\n")
    job = zig.compile_object(source, folder / "k.o", [], HOST, zig_cache, tmp_path / "zl")
    job.wait()
    return job.proc.args, (folder / "k.o").read_bytes()


def _memos(zig_cache):
    from jitflow.toolchain.zig_cc import probe_memo

    return sorted((zig_cache / probe_memo.FOLDER).glob("*.json"))


def test_a_new_process_runs_the_kept_command_without_asking_zig(tmp_path, own_zig_cache, monkeypatch):
    from jitflow.toolchain.zig_cc import zig, zig_direct

    args, first = _compile(tmp_path, own_zig_cache, "a")
    assert args[1] == "-cc1" and len(_memos(own_zig_cache)) == 1
    zig._compile_probe.cache_clear()                                  # a new process
    monkeypatch.setattr(zig_direct, "probe_compile", lambda *a: pytest.fail("zig was asked again"))
    args, again = _compile(tmp_path, own_zig_cache, "b")
    assert args[1] == "-cc1" and again == first


def test_a_damaged_memo_is_asked_for_again(tmp_path, own_zig_cache):
    from jitflow.toolchain.zig_cc import zig

    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    for n, damage in enumerate(["not json", json.dumps({"folder": "/x", "command": ["/not/zig", "clang"]}), "[1]"]):
        memo.write_text(damage)
        zig._compile_probe.cache_clear()
        args, again = _compile(tmp_path, own_zig_cache, f"b{n}")
        assert args[1] == "-cc1" and again == first
        assert json.loads(memo.read_text())["command"][0] == zig.zig_binary()      # asked again, kept again


def test_a_kept_command_that_fails_where_zig_cc_succeeds_is_forgotten(tmp_path, own_zig_cache):
    from jitflow.toolchain.zig_cc import zig

    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    kept = json.loads(memo.read_text())
    kept["frontend"] = [*kept["frontend"], "-fno-such-option"]
    memo.write_text(json.dumps(kept))
    zig._compile_probe.cache_clear()
    args, made = _compile(tmp_path, own_zig_cache, "b")
    assert args[1] == "cc" and b"jitflow_memo" in made     # zig cc compiled it
    assert not memo.exists()
    args, _ = _compile(tmp_path, own_zig_cache, "c")     # asked again: direct once more
    assert args[1] == "-cc1" and "-fno-such-option" not in args and memo.exists()


def test_threads_asking_for_one_command_wait_for_one_answer(tmp_path, own_zig_cache, monkeypatch):
    from jitflow.toolchain.zig_cc import zig, zig_direct

    asked = []
    real = zig_direct.probe_compile
    monkeypatch.setattr(zig_direct, "probe_compile", lambda *a: asked.append(1) or real(*a))
    threads = [threading.Thread(target=zig.prepare_compile, args=(HOST, [], own_zig_cache)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(asked) == 1


def test_a_link_command_is_kept_too(tmp_path, own_zig_cache, monkeypatch):
    from jitflow.toolchain.zig_cc import link, zig, zig_direct

    _compile(tmp_path, own_zig_cache, "o")
    link.link_shared([tmp_path / "o" / "k.o"], tmp_path / "o" / "one.so", HOST, own_zig_cache, tmp_path / "zl")
    assert len(_memos(own_zig_cache)) == 2
    zig._link_probe.cache_clear()
    monkeypatch.setattr(zig_direct, "probe_link", lambda *a: pytest.fail("zig was asked again"))
    ran = []
    real_job = zig.Job
    monkeypatch.setattr(zig, "Job", lambda *a, **k: ran.append(k.get("direct")) or real_job(*a, **k))
    link.link_shared([tmp_path / "o" / "k.o"], tmp_path / "o" / "two.so", HOST, own_zig_cache, tmp_path / "zl")
    assert ran[-1] is not None and ran[-1][1] == "ld.lld"
    assert (tmp_path / "o" / "one.so").read_bytes() == (tmp_path / "o" / "two.so").read_bytes()


# --- a memo is untrusted input: kept only as jitflow writes it, read only as jitflow would keep it ---



def _marker_program(tmp_path):
    """A program that leaves a marker file when run (and then fails): a planted memo's payload."""
    marker = tmp_path / "ran-as-you"
    program = tmp_path / "planted"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    program.chmod(0o755)
    return program, marker


def _compile_asking(tmp_path, zig_cache, name, monkeypatch):
    """Compile in a process that has asked for nothing yet; returns (args, object, times zig was asked)."""
    from jitflow.toolchain.zig_cc import zig, zig_direct

    asked = []
    real = zig_direct.probe_compile
    monkeypatch.setattr(zig_direct, "probe_compile", lambda *a: asked.append(1) or real(*a))
    zig._compile_probe.cache_clear()
    args, made = _compile(tmp_path, zig_cache, name)
    monkeypatch.setattr(zig_direct, "probe_compile", real)
    return args, made, len(asked)


def test_a_memo_whose_compiler_proper_is_another_program_is_never_run(tmp_path, own_zig_cache, monkeypatch):
    program, marker = _marker_program(tmp_path)
    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    kept = json.loads(memo.read_text())
    kept["frontend"] = [str(program), *kept["frontend"][1:]]
    memo.write_text(json.dumps(kept))
    args, made, asked = _compile_asking(tmp_path, own_zig_cache, "b", monkeypatch)
    assert not marker.exists()
    assert asked == 1 and args[1] == "-cc1" and made == first          # asked of zig again, and built
    assert json.loads(memo.read_text())["frontend"][0] != str(program)  # and kept as zig said


@pytest.mark.parametrize("where,words", [
    ("frontend", ["-load", "/tmp/jitflow-planted.so"]),
    ("frontend", ["-include", "/tmp/jitflow-planted.h"]),
    ("frontend", ["-isystem", "/tmp/jitflow-planted"]),
    ("frontend", ["-mllvm", "-print-after-all"]),                # an LLVM option jitflow never asks for
    ("command", ["-mllvm", "-unroll-threshold=100000"]),
    ("command", ["-fplugin=/tmp/jitflow-planted.so"]),
    ("command", ["-Xclang", "-load", "-Xclang", "planted.so"]),
    ("command", ["@/tmp/jitflow-planted-arguments"]),
    ("command", ["-Wl,--defsym=main=planted"]),
    ("command", ["/tmp/jitflow-planted.o"]),
])
def test_a_memo_with_words_zig_never_prints_is_refused(tmp_path, own_zig_cache, where, words):
    from jitflow.toolchain.zig_cc import probe_memo, zig, zig_direct

    _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    kept = json.loads(memo.read_text())
    parts = zig._compile_request(HOST, (), None, ())
    good = zig_direct.Probe(kept["folder"], tuple(kept["command"]), tuple(kept["frontend"]))
    assert probe_memo.read(own_zig_cache, memo.stem, zig.zig_binary(), parts) == good
    at = len(kept[where]) - 4                                    # before "-o OBJECT" or "-x c SOURCE"
    kept[where] = [*kept[where][:at], *words, *kept[where][at:]]
    memo.write_text(json.dumps(kept))
    assert probe_memo.read(own_zig_cache, memo.stem, zig.zig_binary(), parts) is None
    kept = dict(json.loads(memo.read_text()), asked=zig._link_request(HOST, (), ()))
    memo.write_text(json.dumps(kept))                           # nor is a memo of another request
    assert probe_memo.read(own_zig_cache, memo.stem, zig.zig_binary(), parts) is None


def test_zigs_own_commands_pass_the_check(own_zig_cache):
    """What a memo may hold is what zig prints, for each host, CPU level and link jitflow asks for
    (were one refused, every process would ask zig again)."""
    from jitflow.toolchain.zig_cc import link, probe_memo, zig

    for host, cpu in (("x86_64-linux-gnu", None), ("x86_64-linux-gnu", "x86_64_v3"),
                      ("aarch64-linux-gnu", None), ("aarch64-linux-gnu", "neoverse_n1")):
        includes = (f"-I{own_zig_cache}",)
        probe = zig._compile_probe(host, includes, str(own_zig_cache), cpu, ())
        assert probe is not None and probe.frontend
        assert probe_memo.problem(probe, own_zig_cache, zig.zig_binary(),
                                  zig._compile_request(host, includes, cpu, ())) is None
        before, after = link._flags(host, own_zig_cache, False)   # (with zig's compiler runtime: minutes)
        probe = zig._link_probe(host, tuple(before), tuple(after), str(own_zig_cache))
        assert probe is not None
        assert probe_memo.problem(probe, own_zig_cache, zig.zig_binary(),
                                  zig._link_request(host, tuple(before), tuple(after))) is None
    from jitflow.builder.host_c import compile as host_compile

    large = tuple(host_compile.LARGE_FUNCTION_FLAGS)              # the LLVM options of large functions
    probe = zig._compile_probe("x86_64-linux-gnu", (), str(own_zig_cache), None, large)
    assert probe is not None and probe.frontend
    assert probe_memo.problem(probe, own_zig_cache, zig.zig_binary(),
                              zig._compile_request("x86_64-linux-gnu", (), None, large)) is None
    assert len(_memos(own_zig_cache)) == 7                        # and each was kept


def _plant(memo, how, tmp_path):
    """Put something other than the memo jitflow wrote at its name."""
    if not plant(memo, how, tmp_path):
        assert how == "oversized"
        memo.write_bytes(memo.read_bytes() + b" " * (1 << 20))


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("how", ["another user's", "a link", "writable by others", "truncated", "garbage",
                                 "oversized"])
def test_a_memo_not_as_jitflow_wrote_it_is_asked_for_again(tmp_path, own_zig_cache, monkeypatch, how):
    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    _plant(memo, how, tmp_path)
    args, made, asked = _compile_asking(tmp_path, own_zig_cache, "b", monkeypatch)
    assert asked == 1 and args[1] == "-cc1" and made == first
    st = memo.lstat()                                            # replaced by what zig said
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o600


def test_a_fifo_in_place_of_a_memo_does_not_hang_a_build(tmp_path, own_zig_cache, monkeypatch):
    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    memo.unlink()
    os.mkfifo(memo)
    done = []
    worker = threading.Thread(target=lambda: done.append(_compile_asking(tmp_path, own_zig_cache, "b", monkeypatch)),
                              daemon=True)
    worker.start()
    worker.join(120)                                            # generous: a compile takes well under a second
    try:
        assert done and done[0][2] == 1 and done[0][1] == first
        assert stat.S_ISREG(memo.lstat().st_mode)
    finally:
        if worker.is_alive():                                   # the old behaviour: release the reader
            os.close(os.open(memo, os.O_WRONLY | os.O_NONBLOCK))
