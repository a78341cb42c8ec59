"""The commands zig runs, kept in zig's cache folder: a new process asks zig for none of them, a
damaged memo is asked for again, and a memo whose command fails where zig cc succeeds is forgotten."""
from __future__ import annotations

import json
import threading

import pytest

HOST = "x86_64-linux-gnu"


@pytest.fixture
def own_zig_cache(tmp_path):
    """A zig cache of this test's own, and a process that has asked for no command yet."""
    from jitflow.toolchain import zig

    folder = tmp_path / "zig"
    folder.mkdir()
    zig._compile_probe.cache_clear()
    zig._link_probe.cache_clear()
    yield folder
    zig._compile_probe.cache_clear()
    zig._link_probe.cache_clear()


def _compile(tmp_path, zig_cache, name):
    from jitflow.toolchain import zig

    folder = tmp_path / name                 # the same file name each time: it is in the object
    folder.mkdir()
    source = folder / "k.c"
    source.write_text("int jitflow_memo(int x) { return x + 7; }\n")
    job = zig.compile_object(source, folder / "k.o", [], HOST, zig_cache, tmp_path / "zl")
    job.wait()
    return job.proc.args, (folder / "k.o").read_bytes()


def _memos(zig_cache):
    from jitflow.toolchain import probe_memo

    return sorted((zig_cache / probe_memo.FOLDER).glob("*.json"))


def test_a_new_process_runs_the_kept_command_without_asking_zig(tmp_path, own_zig_cache, monkeypatch):
    from jitflow.toolchain import zig, zig_direct

    args, first = _compile(tmp_path, own_zig_cache, "a")
    assert args[1] == "-cc1" and len(_memos(own_zig_cache)) == 1
    zig._compile_probe.cache_clear()                                  # a new process
    monkeypatch.setattr(zig_direct, "probe_compile", lambda *a: pytest.fail("zig was asked again"))
    args, again = _compile(tmp_path, own_zig_cache, "b")
    assert args[1] == "-cc1" and again == first


def test_a_damaged_memo_is_asked_for_again(tmp_path, own_zig_cache):
    from jitflow.toolchain import zig

    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    for n, damage in enumerate(["not json", json.dumps({"folder": "/x", "command": ["/not/zig", "clang"]}), "[1]"]):
        memo.write_text(damage)
        zig._compile_probe.cache_clear()
        args, again = _compile(tmp_path, own_zig_cache, f"b{n}")
        assert args[1] == "-cc1" and again == first
        assert json.loads(memo.read_text())["command"][0] == zig.zig_binary()      # asked again, kept again


def test_a_kept_command_that_fails_where_zig_cc_succeeds_is_forgotten(tmp_path, own_zig_cache):
    from jitflow.toolchain import zig

    _, first = _compile(tmp_path, own_zig_cache, "a")
    (memo,) = _memos(own_zig_cache)
    kept = json.loads(memo.read_text())
    kept["frontend"] = [*kept["frontend"], "-no-such-option"]
    memo.write_text(json.dumps(kept))
    zig._compile_probe.cache_clear()
    args, made = _compile(tmp_path, own_zig_cache, "b")
    assert args[1] == "cc" and b"jitflow_memo" in made     # zig cc compiled it
    assert not memo.exists()
    args, _ = _compile(tmp_path, own_zig_cache, "c")     # asked again: direct once more
    assert args[1] == "-cc1" and "-no-such-option" not in args and memo.exists()


def test_threads_asking_for_one_command_wait_for_one_answer(tmp_path, own_zig_cache, monkeypatch):
    from jitflow.toolchain import zig, zig_direct

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
    from jitflow.toolchain import link, zig, zig_direct

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
