"""Shared fixtures: a private cache per test, the machine's zig cache, GPU detection."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))


def _gpu_present() -> bool:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_present():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU and driver here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def zig_cache() -> Path:
    """The zig cache every jitflow process of this user shares (JITFLOW_ZIG_CACHE_DIR, else the per-user
    toolchain folder), as users get it: what zig builds once (the aarch64 test driver's C library and
    compiler runtime, for one) is built once per machine, not once per test session."""
    from jitflow.toolchain import zig_cache as location

    configured = os.environ.get("JITFLOW_ZIG_CACHE_DIR")
    return location.folder(Path(configured) if configured else None)


@pytest.fixture
def cache_dir(tmp_path, zig_cache, monkeypatch) -> Path:
    """A fresh jitflow cache for this test, also exported to subprocesses through the environment."""
    path = tmp_path / "cache"
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(path))
    monkeypatch.setenv("JITFLOW_ZIG_CACHE_DIR", str(zig_cache))
    monkeypatch.delenv("JITFLOW_CACHE", raising=False)
    monkeypatch.delenv("JITFLOW_CUDA_COMPILER", raising=False)
    return path


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300,
               check: bool = True) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with the tests folder importable."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def start_python(code: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
