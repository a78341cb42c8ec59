"""Run the `jitflow` command (in this process, or in a subprocess where that matters), and build a cache for the CLI tests to share."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, TESTS, run_python


def jf(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`jitflow ARGS` run in this process through the command's entry function, its output and exit status
    captured as a subprocess's would be: a fresh process would spend about 1.6 s importing TVM. `env` is
    added to the environment for the call, JITFLOW_LOG included; warnings said once are said again, as in a
    new process. `jf_process` runs the real command where a process of its own matters."""
    import logging

    from jitflow import config, logs
    from jitflow.cli.main import main

    saved_env = dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_handlers, saved_level = list(logs.log.handlers), logs.log.level
    out, err = io.TextIOWrapper(io.BytesIO(), "utf-8", write_through=True), io.StringIO()
    os.environ.update(env or {})
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin or ""), out, err
    logs.forget_warnings()
    logs.log.handlers = [h for h in logs.log.handlers if not getattr(h, "_jitflow", False)]
    logs.configure(config.log_level())
    try:
        try:
            code = main(list(args))
        except SystemExit as exc:       # argparse: --help, usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        sys.stdout.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        logs.log.handlers, logs.log.level = saved_handlers, saved_level
        logs.forget_warnings()
        logging.getLogger("jitflow").disabled = False
    out.seek(0)
    return subprocess.CompletedProcess(["jitflow", *args], code, out.buffer.getvalue().decode("utf-8", "replace"),
                                       err.getvalue())


def jf_process(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m jitflow ARGS` in a fresh process with the tests folder importable; `env` is added to this
    process's."""
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
