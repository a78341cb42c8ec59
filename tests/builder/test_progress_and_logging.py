"""Logging: hit/miss and stage times at info; nothing at the default level; progress only on request."""
from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import time

import kernels
import pytest
from conftest import ROOT, run_python

import jitflow
from jitflow import config
from jitflow.builder import progress


def test_info_logs_miss_stages_and_hit(cache_dir, caplog):
    caplog.set_level(logging.INFO, logger="jitflow")
    exe = jitflow.compile(kernels.axpb(700.0), "c")
    exe.jit()
    text = caplog.text
    for stage in ("lower took", "host took", "link took", "store took", "built "):
        assert stage in text
    again = run_python("""
        import jitflow, kernels
        jitflow.compile(kernels.axpb(700.0), "c").jit()
    """, env={"JITFLOW_LOG": "info"}).stderr   # a new process: a hit from the disk cache
    assert "hit " in again and "lower took" not in again


def test_build_info_has_stage_times(cache_dir):
    exe = jitflow.compile(kernels.axpb(701.0), "c")
    exe.jit()
    info = exe.build_info
    assert info.outcome == "built" and set(info.stages) >= {"lower", "host", "link", "store"}
    assert all(v >= 0 for v in info.stages.values()) and info.total >= max(info.stages.values())


def _adds_up(info) -> str:
    """'' when a build's stages add up to its total (a generous bound: the machine is busy), else why."""
    spent = sum(info.stages.values())
    return "" if abs(info.total - spent) <= 0.1 * info.total + 0.005 else f"{info} adds up to {spent * 1000:.1f} ms"


def test_a_builds_stages_add_up_to_its_total(cache_dir):
    # a first build in a fresh process: the builder's import and the key counted, cached and not
    code = """
        import jitflow, kernels
        for cache in (True, False):
            exe = jitflow.compile(kernels.axpb(705.0), "c", cache=cache)
            exe.jit()        # the key is taken first, then the build: both count
            info = exe.build_info
            print(info.total, sum(info.stages.values()), " ".join(k.replace(" ", "_") for k in info.stages))
    """
    lines = run_python(code).stdout.splitlines()
    for line in lines:
        total, spent, names = line.split(maxsplit=2)
        assert abs(float(total) - float(spent)) <= 0.1 * float(total) + 0.005, line
        assert names.startswith("key lookup"), line
    assert "import" in lines[0].split()          # the first build imports the builder
    # and in a process that has built before, through build(): where the key was not taken first
    for cache in (True, False):
        exe = jitflow.compile(kernels.axpb(706.0), "c", cache=cache)
        exe.build()
        assert exe.build_info.outcome == "built" and "key" in exe.build_info.stages
        assert _adds_up(exe.build_info) == ""
    again = jitflow.compile(kernels.axpb(706.0), "c")
    again.build()                       # a hit: nothing built, no stages
    assert again.build_info.outcome == "hit" and again.build_info.stages == {}


def test_jitflow_log_env_levels(cache_dir):
    code = """
        import jitflow, kernels
        jitflow.compile(kernels.axpb(702.0), "c").jit()
    """
    assert run_python(code, env={"JITFLOW_LOG": ""}).stderr.strip() == ""
    info = run_python(code.replace("702.0", "703.0"), env={"JITFLOW_LOG": "info"}).stderr
    assert "lower took" in info and " ... " not in info
    debug = run_python(code.replace("702.0", "704.0"), env={"JITFLOW_LOG": "debug"}).stderr
    assert "lower ..." in debug
    assert debug.count("compiling the host C") == 1, debug      # said once, however often the line is set


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_terminals_and_only_for_slow_builds(monkeypatch):
    monkeypatch.delenv("JITFLOW_PROGRESS", raising=False)
    quiet = io.StringIO()
    p = progress.Progress("x", stream=quiet, delay=0.0)
    time.sleep(0.1)
    p.close()
    assert quiet.getvalue() == ""               # not a terminal
    fast = _Tty()
    p = progress.Progress("x", stream=fast, delay=5.0)
    p.close()
    assert fast.getvalue() == ""                # finished before the delay
    slow = _Tty()
    p = progress.Progress("abc", stream=slow, delay=0.0)
    p.set("device code for sm_90")
    p.finished("sm_80")
    time.sleep(0.3)
    p.close()
    out = slow.getvalue()
    assert "building abc | " in out and "device code for sm_90" in out and "done: sm_80" in out
    assert out.endswith("\n")
    monkeypatch.setenv("JITFLOW_PROGRESS", "0")
    assert not progress.enabled(_Tty(), config.progress_mode())


def test_a_bad_jitflow_log_warns_once_and_keeps_the_default(cache_dir):
    code = """
        import jitflow, kernels
        jitflow.compile(kernels.axpb(705.0), "c").jit()         # a build: it logs at info
    """
    err = run_python(code, env={"JITFLOW_LOG": "bogus"}).stderr
    assert err.count("JITFLOW_LOG='bogus' is not a level") == 1, err
    assert "using the default (warnings only)" in err
    assert "built " not in err and "lower took" not in err, err    # nothing at info: warnings only


SGR = re.compile(r"\x1b\[[0-9;]*m")      # a colour (Select Graphic Rendition) sequence


@pytest.mark.parametrize("no_color", [None, "1"])
def test_no_colour_is_printed_so_no_color_has_nothing_to_turn_off(monkeypatch, no_color):
    """jitflow colours nothing: the progress line's one control sequence erases the line (and
    JITFLOW_PROGRESS=off silences it). A colour added one day must honour NO_COLOR (read in config.py)."""
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    line = _Tty()
    p = progress.Progress("abc", stream=line, delay=0.0, mode="on")
    time.sleep(0.3)
    p.close()
    assert "\r\x1b[2K" in line.getvalue() and not SGR.search(line.getvalue())
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | ({"NO_COLOR": no_color} if no_color else {})
    out = subprocess.run([sys.executable, "-m", "jitflow", "doctor", "--cpu"], capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=str(ROOT)), timeout=120)
    assert "[ok] TVM" in out.stdout and "\x1b" not in out.stdout + out.stderr
