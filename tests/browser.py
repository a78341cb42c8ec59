"""A real browser for the tests that open jitflow's pages: Debian's headless Chromium.

CI sets JITFLOW_REQUIRE_CHROMIUM=1 (and CI=true): there a missing browser fails the test instead of
skipping it. `dump_dom(page)` returns the DOM after the page's script ran.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def required_in_ci() -> bool:
    return bool(os.environ.get("JITFLOW_REQUIRE_CHROMIUM") or os.environ.get("CI"))


def missing() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    return None if chromium() else "no headless browser (Debian: apt-get install chromium)"


def dump_dom(page: Path, timeout: float = 60) -> str:
    """The page's DOM, serialized by Chromium once it loaded it (scripts run)."""
    with tempfile.TemporaryDirectory(prefix="jitflow-chromium-") as profile:
        proc = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                               page.absolute().as_uri()], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise AssertionError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout
