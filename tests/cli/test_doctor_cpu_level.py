"""`jitflow doctor` says which CPU level builds here take and whether this CPU runs what they build."""
from __future__ import annotations

import json

import pytest
from cli_run import cache_env, jf

from jitflow.cli.doctor import cpu_level_checks
from jitflow.runtime import cpu_features
from jitflow.targets import cpu_level, hosts

V2_CPU = cpu_level.LEVELS[cpu_level.X86]["x86-64-v2"][1]           # features of an x86-64-v2 CPU, no AVX
V3_NEEDS = set(cpu_level.LEVELS[cpu_level.X86]["x86-64-v3"][1])


@pytest.fixture
def x86_v2(monkeypatch):
    """This process on an x86-64 machine whose CPU reaches x86-64-v2 only."""
    monkeypatch.setattr(hosts, "machine_host", lambda: cpu_level.X86)
    with cpu_features.simulated(V2_CPU, "a v2 CPU"):
        yield


def _one(monkeypatch, level: str | None):
    if level is None:
        monkeypatch.delenv("JITFLOW_CPU_LEVEL", raising=False)
    else:
        monkeypatch.setenv("JITFLOW_CPU_LEVEL", level)
    [check] = cpu_level_checks()
    return check


def test_the_default_level_passes_and_says_how_far_this_cpu_goes(x86_v2, monkeypatch):
    check = _one(monkeypatch, None)
    assert check.ok and check.detail == ("builds for x86-64 (the default: any x86_64 CPU); "
                                         "this CPU (a v2 CPU) runs up to x86-64-v2; vector code and math "
                                         "built for the baseline use SSE2: 128-bit vectors, no FMA, and this "
                                         "CPU runs x86-64-v2: cpu_level='native' (or JITFLOW_CPU_LEVEL=native) "
                                         "builds for it, for local jit() use")


def test_the_default_level_on_a_baseline_cpu_says_nothing_more(monkeypatch):
    monkeypatch.setattr(hosts, "machine_host", lambda: cpu_level.X86)
    monkeypatch.delenv("JITFLOW_CPU_LEVEL", raising=False)
    with cpu_features.simulated(["sse", "sse2"], "an old CPU"):
        [check] = cpu_level_checks()
    assert check.ok and check.detail.endswith("this CPU (an old CPU) runs up to x86-64")


def test_a_level_this_cpu_lacks_is_a_warning_that_names_the_features_and_the_fix(x86_v2, monkeypatch):
    check = _one(monkeypatch, "X86_64_V3")
    lacking = sorted(V3_NEEDS - set(V2_CPU))
    assert not check.ok and not check.required and "avx2" in lacking
    assert check.detail == (f"builds for x86-64-v3 (JITFLOW_CPU_LEVEL), and this CPU (a v2 CPU) lacks "
                            f"{', '.join(lacking)}: what it builds will not load here")
    assert check.fix.startswith("set JITFLOW_CPU_LEVEL=x86-64-v2 or unset it")
    assert _one(monkeypatch, "x86-64-v2").ok


def test_native_is_shown_resolved_and_a_level_of_the_other_host_is_explained(x86_v2, monkeypatch):
    native = _one(monkeypatch, "native")
    assert native.ok and native.detail.startswith("builds for native = x86_64_v2")
    arm = _one(monkeypatch, "neoverse-v2")
    assert not arm.ok and not arm.required
    assert "is a level of aarch64-linux-gnu hosts" in arm.detail and "x86_64-linux-gnu" in arm.detail


def test_a_bad_level_is_left_to_the_settings_check(x86_v2, monkeypatch):
    monkeypatch.setenv("JITFLOW_CPU_LEVEL", "bogus")
    assert cpu_level_checks() == []


@pytest.mark.skipif(hosts.machine_host() != cpu_level.X86, reason="names an Arm level as the other host's")
def test_doctor_prints_the_cpu_level_line(tmp_path, zig_cache):
    env = {**cache_env(tmp_path / "cache", zig_cache), "JITFLOW_CPU_LEVEL": "neoverse-v2"}
    text = jf("doctor", "--cpu", env=env)
    assert "[--] CPU level: JITFLOW_CPU_LEVEL=neoverse-v2 is a level of aarch64-linux-gnu hosts" in text.stdout
    assert text.returncode == 0                              # a warning: the required checks passed
    doc = json.loads(jf("doctor", "--cpu", "--json", env=env).stdout)
    [check] = [c for c in doc["checks"] if c["name"] == "CPU level"]
    assert check["ok"] is False and check["required"] is False and doc["warnings"] == 1
