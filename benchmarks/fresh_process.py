"""Run a timing script in a fresh interpreter and read back the JSON it prints last."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time


def run(code: str, env: dict[str, str], what: str, show_stderr: bool = False) -> dict[str, float]:
    """Timings the child printed, plus 'process': the whole interpreter's wall time (with
    `show_stderr`, what the child wrote there is passed on)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{what} run failed:\n{proc.stderr}")
    if show_stderr:
        sys.stderr.write(proc.stderr)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process"] = wall
    return out
