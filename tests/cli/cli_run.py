"""Run the real `jitflow` command in a subprocess, and build a cache for the CLI tests to share."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, TESTS, run_python


def jf(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m jitflow ARGS` with the tests folder importable; `env` is added to this process's."""
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), **(env or {}))
    return subprocess.run([sys.executable, "-m", "jitflow", *args], capture_output=True, text=True, env=full,
                          input=stdin, timeout=300)


def cache_env(cache: Path, zig_cache: Path) -> dict[str, str]:
    return {"JITFLOW_CACHE_DIR": str(cache), "JITFLOW_ZIG_CACHE_DIR": str(zig_cache), "JITFLOW_CACHE": "1"}


def build_entries(env: dict[str, str], code: str) -> list[str]:
    """Run `code` (which prints one cache key a line) against the cache of `env`; the keys."""
    return run_python(code, env=env).stdout.split()


def copy_cache(src: Path, dest: Path) -> Path:
    """A copy of a built cache (entries keep their times and private modes) to change in one test."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def entry_folder(cache: Path, key: str) -> Path:
    return cache / "v1" / "entries" / key[:2] / key


def no_traceback(proc: subprocess.CompletedProcess) -> bool:
    return "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
