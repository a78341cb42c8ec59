"""The record of obtained keys (cache/deploy/record.py, JITFLOW_RECORD): what a workload's processes got,
one JSON line each, written whole by processes racing on one file, and never through a link or a FIFO."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

import kernels
import pytest
from conftest import OTHER_UID, as_other_user, needs_root, run_python, start_python

import jitflow
from jitflow.cache.deploy import record
from jitflow.errors import RecordError
from jitflow.targets import machine_host

#: a workload of three modules, each obtained a different way; prints the keys it obtained
WORKLOAD = """
    import json, os, tempfile
    import numpy as np, tvm, jitflow, kernels, models
    keys = []
    a = tvm.runtime.tensor(np.ones(64, "float32"))
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe = jitflow.compile(kernels.axpb(3.0), "c")
    exe["main"](a, c)
    assert (c.numpy() == 4).all()
    keys.append(exe.key)
    exe = jitflow.compile(kernels.axpb(5.0), "c", name="scale-by-five")
    exe.export_library(os.path.join(tempfile.mkdtemp(), "k.so"))
    keys.append(exe.key)
    exe = jitflow.compile(models.mlp(), "c")
    exe.build()
    keys.append(exe.key)
    print(json.dumps([keys, exe.build_info.outcome]))
"""


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_workload_of_three_modules_records_all_three_keys(cache_dir, tmp_path):
    path = tmp_path / "record.jsonl"
    keys, _ = json.loads(run_python(WORKLOAD, env={"JITFLOW_RECORD": str(path)}).stdout.splitlines()[-1])
    lines = _lines(path)
    assert [line["key"] for line in lines] == keys and len(set(keys)) == 3
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for line in lines:
        assert set(record.FIELDS) <= set(line) and re.fullmatch("[0-9a-f]{64}", line["key"])
        assert line["outcome"] == "built" and line["target"] == "c" and line["jitflow"] == jitflow.__version__
        assert line["cache"] == str(cache_dir) and line["host"] == machine_host()
        when = time.mktime(time.strptime(line["time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        assert line["time"].endswith("Z") and abs(when - time.time()) < 3600
    assert [line["label"] for line in lines] == ["main", "scale-by-five", "main"]

    # a second run: the same keys, as hits, appended to the same file
    again, outcome = json.loads(run_python(WORKLOAD, env={"JITFLOW_RECORD": str(path)}).stdout.splitlines()[-1])
    assert again == keys and outcome == "hit"
    assert [(line["key"], line["outcome"]) for line in _lines(path)[3:]] == [(k, "hit") for k in keys]


RACER = """
    import json, os, sys, time
    import numpy as np, tvm, jitflow, kernels
    from jitflow.cache.deploy import record
    from pathlib import Path
    index, path, go = {index}, Path({path!r}), Path({go!r})
    exes = [jitflow.compile(kernels.axpb(s), "c") for s in (1.0, 2.0, 3.0)]
    while not go.exists():
        time.sleep(0.005)
    for exe in exes:
        exe.jit()                                   # hits: one line each
    meta = {{"functions": ["f%d" % i for i in range(400)], "target": {{"kind": "c", "archs": [], "host": "h"}}}}
    for n in range(300):                            # long lines, many of them, all at once
        key = "%064x" % (index * 1000 + n)
        record.append(path, record.line(key, meta, "built", "/c").rstrip(b"\\n") + b" " * 3000 + b"\\n")
"""


@pytest.mark.slow
def test_eight_processes_recording_at_once_lose_and_mix_no_line(cache_dir, tmp_path):
    keys = [jitflow.compile(kernels.axpb(s), "c") for s in (1.0, 2.0, 3.0)]
    for exe in keys:
        exe.build()
    path, go = tmp_path / "record.jsonl", tmp_path / "go"
    procs = [start_python(RACER.format(index=i, path=str(path), go=str(go)), env={"JITFLOW_RECORD": str(path)})
             for i in range(8)]
    time.sleep(1)
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) - 1 == 8 * (3 + 300)
    parsed = [json.loads(line) for line in lines[:-1]]          # every line parses: none was mixed
    found = {p["key"] for p in parsed}
    assert {exe.key for exe in keys} <= found
    assert {"%064x" % (i * 1000 + n) for i in range(8) for n in range(300)} <= found
    assert sum(p["outcome"] == "hit" for p in parsed) == 8 * 3


def test_a_link_a_fifo_or_a_folder_is_refused_and_never_written_through(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.axpb(7.0), "c")
    exe.build()
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for name, says in [("link", "symbolic link"), ("fifo", "FIFO"), ("folder", "folder"),
                       ("missing/record.jsonl", "folder does not exist")]:
        with pytest.raises(RecordError, match=f"cannot write the record .*{name}.*{says}.*unset JITFLOW_RECORD"):
            jitflow.compile(kernels.axpb(7.0), "c", record=tmp_path / name).build()
    assert target.read_text() == "keep\n" and stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    # a FIFO that has a reader is opened, then refused as not a regular file: nothing is written to it
    reader = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(RecordError, match="not a regular file"):
            jitflow.compile(kernels.axpb(7.0), "c", record=tmp_path / "fifo").build()
        try:
            assert os.read(reader, 10) == b""       # the end of a FIFO whose writer left without writing
        except BlockingIOError:
            pass
    finally:
        os.close(reader)
    # an existing record keeps its mode and content, and gets the line
    existing = tmp_path / "existing.jsonl"
    existing.write_text('{"key": "%s"}\n' % ("0" * 64))
    existing.chmod(0o640)
    jitflow.compile(kernels.axpb(7.0), "c", record=existing).build()
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640
    assert [line["key"] for line in _lines(existing)] == ["0" * 64, exe.key]


def test_a_key_is_recorded_once_per_process_and_file_unless_built_again(cache_dir, tmp_path):
    path = tmp_path / "record.jsonl"
    exe = jitflow.compile(kernels.axpb(8.0), "c", record=path)
    exe.build()
    for _ in range(3):
        jitflow.compile(kernels.axpb(8.0), "c", record=path).build()
        jitflow.compile(kernels.axpb(8.0), "c", record=path).jit()     # a hit, then from memory
    other = tmp_path / "other.jsonl"
    jitflow.compile(kernels.axpb(8.0), "c", record=other).jit()         # from memory: first in that file
    assert [line["outcome"] for line in _lines(path)] == ["built"]
    assert [(line["key"], line["outcome"]) for line in _lines(other)] == [(exe.key, "memory")]


def test_a_build_that_is_not_cached_is_not_recorded_and_says_so(cache_dir, tmp_path, caplog):
    path = tmp_path / "record.jsonl"
    jitflow.compile(kernels.axpb(9.0), "c", cache=False, record=path).build()
    assert not path.exists()
    assert any("is not recorded" in r.getMessage() and "caching is off" in r.getMessage() for r in caplog.records)


def test_build_all_records_what_its_processes_obtained(cache_dir, tmp_path):
    path = tmp_path / "record.jsonl"
    for s in (1.0, 2.0):
        jitflow.compile(kernels.axpb(s), "c").build()
    exes = [jitflow.compile(kernels.axpb(s), "c", record=path) for s in (1.0, 2.0, 1.0)]
    results = jitflow.build_all(exes, jobs=2)        # two forked processes, each a hit; the twin is not built
    assert [r.outcome for r in results] == ["hit", "hit", "hit"]
    lines = _lines(path)
    assert sorted(line["key"] for line in lines) == sorted({e.key for e in exes})
    assert {line["outcome"] for line in lines} == {"hit"}


CHDIR = """
    import os, jitflow, kernels
    first = jitflow.compile(kernels.axpb(21.0), "c", record={record!r})
    first.build()
    os.chdir("data")                                 # the record stays the one named in the first folder
    second = jitflow.compile(kernels.axpb(22.0), "c", record={record!r})
    second.build()
    print(first.key, second.key)
"""


@pytest.mark.parametrize("how", ["JITFLOW_RECORD", "record="])
def test_a_relative_record_stays_where_it_was_first_read_after_chdir(cache_dir, tmp_path, how):
    (tmp_path / "data").mkdir()
    env = {"JITFLOW_RECORD": "record.jsonl"} if how == "JITFLOW_RECORD" else {}
    code = CHDIR.format(record=None if how == "JITFLOW_RECORD" else "record.jsonl")
    keys = run_python(code, env=env, cwd=tmp_path).stdout.split()
    assert [line["key"] for line in _lines(tmp_path / "record.jsonl")] == keys and len(set(keys)) == 2
    assert not (tmp_path / "data" / "record.jsonl").exists()


@pytest.fixture
def sticky_folder():
    """A folder like /tmp (root's, world-writable, sticky) that another user can reach."""
    base = Path(tempfile.mkdtemp(prefix="jitflow-test-"))
    os.chmod(base, 0o755)
    folder = base / "tmp"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_a_record_another_user_made_is_refused_and_not_appended_to(cache_dir, sticky_folder):
    path, planted = sticky_folder / "record.jsonl", '{"key": "%s"}\n' % ("9f" * 32)

    def plant() -> None:                                    # another user makes the record first, open to all
        path.write_text(planted)
        path.chmod(0o666)

    as_other_user(plant)
    assert path.stat().st_uid == OTHER_UID
    with pytest.raises(RecordError, match=f"cannot write the record {path}: it belongs to another user "
                                          f"\\(uid {OTHER_UID}\\).*a file of your own"):
        jitflow.compile(kernels.axpb(31.0), "c", record=path).build()
    assert path.read_text() == planted


def test_a_record_others_can_write_or_with_a_second_name_is_refused(cache_dir, tmp_path):
    exe = jitflow.compile(kernels.axpb(32.0), "c")
    exe.build()
    shared = tmp_path / "shared.jsonl"
    shared.write_text("")
    shared.chmod(0o666)
    mine = tmp_path / "mine.jsonl"
    mine.write_text("")
    os.link(mine, tmp_path / "second-name.jsonl")
    for path, says in [(shared, "group or others may write it \\(mode 666\\).*chmod go-w"),
                       (tmp_path / "second-name.jsonl", "it has 2 names \\(a hard link"),
                       (mine, "it has 2 names")]:
        with pytest.raises(RecordError, match=f"cannot write the record {path}: {says}"):
            jitflow.compile(kernels.axpb(32.0), "c", record=path).build()
        assert path.read_text() == ""


@needs_root
def test_a_record_this_user_cannot_open_is_a_record_error_that_says_why(sticky_folder):
    path = sticky_folder / "root-only.jsonl"
    path.write_text("")
    path.chmod(0o600)

    def append() -> None:                                   # EACCES, as fs.protected_regular also gives it
        with pytest.raises(RecordError, match="permission denied.*a file of your own"):
            record.append(path, b"{}\n")

    as_other_user(append)
    assert path.read_text() == ""
