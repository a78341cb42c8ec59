"""Shared fixtures: a private cache per test, the machine's zig cache, GPU detection."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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


#: a test file holding this line runs in a TVM installed without its compiler (TVM_USE_RUNTIME_LIB=1 or
#: no libtvm_compiler.so); every other file needs the compiler (tvm.script, tvm.compile) and is left out there
RUNTIME_ONLY_MARK = "RUNS_IN_RUNTIME_ONLY_TVM = True"


def _runtime_only_tvm() -> bool:
    import tvm

    return bool(getattr(tvm.base, "_RUNTIME_ONLY", False))


def pytest_ignore_collect(collection_path, config):
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if _runtime_only_tvm() and RUNTIME_ONLY_MARK not in collection_path.read_text():
        return True
    return None


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
    from jitflow.toolchain.zig_cc import zig_cache as location

    configured = os.environ.get("JITFLOW_ZIG_CACHE_DIR")
    return location.folder(Path(configured) if configured else None)


def use_cache(patch: pytest.MonkeyPatch, path: Path, zig_cache: Path) -> Path:
    """Point jitflow (and subprocesses, through the environment) at cache `path`, with defaults."""
    patch.setenv("JITFLOW_CACHE_DIR", str(path))
    patch.setenv("JITFLOW_ZIG_CACHE_DIR", str(zig_cache))
    patch.delenv("JITFLOW_CACHE", raising=False)
    patch.delenv("JITFLOW_CUDA_COMPILER", raising=False)
    return path


@contextmanager
def module_cache(tmp_path_factory, zig_cache: Path, name: str = "cache") -> Iterator[Path]:
    """A private cache for the builds of a module-scoped fixture (built once, shared by its tests)."""
    with pytest.MonkeyPatch.context() as patch:
        yield use_cache(patch, tmp_path_factory.mktemp(name), zig_cache)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """A cache folder that every pytest worker of this run shares: test files that build the same
    models build each once (a second worker waits on the key's lock and gets a hit)."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    path = root / "shared-model-cache"
    path.mkdir(exist_ok=True)
    return path


@contextmanager
def cache_at(path: Path, zig_cache: Path) -> Iterator[Path]:
    """Builds of a module-scoped fixture in the cache folder `path` (shared_cache, for one)."""
    with pytest.MonkeyPatch.context() as patch:
        yield use_cache(patch, path, zig_cache)


@pytest.fixture
def cache_dir(tmp_path, zig_cache, monkeypatch) -> Path:
    """A fresh jitflow cache for this test, also exported to subprocesses through the environment."""
    return use_cache(monkeypatch, tmp_path / "cache", zig_cache)


#: a user id no account uses: the "other local user" of the security tests
OTHER_UID = 54321
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="acting as a second local user needs root (setuid)")


def as_other_user(action, uid: int = OTHER_UID) -> None:
    """Run `action()` in a forked child that has become another user (needs root); raise if it fails."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
            status = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(status)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "the other user's action failed"


#: code for a reader process: `read(scale)` checks axpb(scale) the two ways a process reads the
#: cache: export_library (a lookup and a copy of the library, in this process: nothing is remembered
#: between calls) and, every `fork_every` calls, jit() in a forked child (a new process's lookup and
#: load). It returns 0, or 1 after printing what failed.
READS = """
    import itertools, os, tempfile, traceback
    import numpy as np, tvm, jitflow, kernels

    _out, _calls = tempfile.mkdtemp(), itertools.count()

    def _check(module, scale):
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        module.get_function("main")(tvm.runtime.tensor(np.ones(64, "float32")), c)
        np.testing.assert_allclose(c.numpy(), scale + 1)

    def _forked_jit(scale):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                _check(jitflow.compile(kernels.axpb(scale), "c").jit(), scale)
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(status)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def read(scale, fork_every=4):
        n = next(_calls)
        if n % fork_every == 0:
            return _forked_jit(scale)
        try:
            path = jitflow.compile(kernels.axpb(scale), "c").export_library(os.path.join(_out, f"{n}.so"))
            _check(jitflow.load(path), scale)
            os.unlink(path)
            return 0
        except Exception:
            traceback.print_exc()
            return 1
"""


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300,
               check: bool = True, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with the tests folder importable (in `cwd`, which comes
    first on its import path)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def start_python(code: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
