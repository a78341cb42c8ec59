"""Another minor version of Python, with the packages computing a cache key reads at the versions
installed here (the same lock file), to compare keys across Python versions.

The environment is made once per machine and kept: a folder under the user's cache named by the
other Python's version and the pinned packages, made under a file lock (a second process waits for
the first), in a staging folder renamed into place when complete, with pip's cache. jitflow and the
tests' helpers come through PYTHONPATH. `environment()` skips the test, saying why, where there is
no other Python (pyenv's versions, `python3.N` on PATH) or the packages cannot be installed (no
network): then there is nothing to compare with.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: what computing a key imports or reads the metadata of: TVM and its dependencies, zig's wheel,
#: jitflow's own dependencies, and the CUDA compiler's wheels (an NVRTC key names their versions)
PACKAGES = ("apache-tvm", "apache-tvm-ffi", "ml_dtypes", "numpy", "typing_extensions", "ziglang", "platformdirs",
            "filelock", "pyelftools", "zstandard", "cuda-python", "cuda-bindings", "cuda-core", "cuda-pathfinder",
            "nvidia-cuda-nvrtc", "nvidia-nvfatbin", "nvidia-cuda-cccl")
#: the minor versions tried, nearest first
MINORS = ((3, 12), (3, 13), (3, 10), (3, 11))
INSTALL_TIMEOUT = 900


@dataclass(frozen=True)
class OtherPython:
    python: Path          # the environment's interpreter
    version: str          # its version, "3.12.1"


def pins() -> list[str]:
    """'name==version' of each package of PACKAGES installed here."""
    out = []
    for name in PACKAGES:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _candidates() -> list[Path]:
    """Interpreters of other minor versions: pyenv's, then python3.N on PATH, nearest minor first."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = []
    for major, minor in MINORS:
        if (major, minor) == sys.version_info[:2]:
            continue
        found += sorted(root.glob(f"{major}.{minor}.*/bin/python{major}.{minor}"), reverse=True)
        on_path = shutil.which(f"python{major}.{minor}")
        if on_path:
            found.append(Path(on_path))
    return found


def _version_of(python: Path) -> str | None:
    """The interpreter's version if it runs and is another minor version than this one, else None."""
    try:
        proc = subprocess.run([str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version or version.rsplit(".", 1)[0] == "%d.%d" % sys.version_info[:2]:
        return None
    return version


def _folder(version: str, pinned: list[str]) -> Path:
    import platformdirs

    digest = hashlib.sha256("\n".join([version, *pinned]).encode()).hexdigest()[:16]
    return Path(platformdirs.user_cache_dir("jitflow", appauthor=False)) / "test-pythons" / f"python{version}-{digest}"


def _make(python: Path, folder: Path, pinned: list[str]) -> None:
    """Make the environment in a staging folder and rename it into place; pytest.skip when pip fails."""
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    steps = [[str(python), "-m", "venv", str(staging)],
             [str(staging / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
              *pinned]]
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess(cmd, -1, "", f"no answer in {INSTALL_TIMEOUT} s")
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln] or ["no message"]
            tail = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1])[:300]
            pytest.skip(f"cannot make a {python.name} environment with the {len(pinned)} packages a key reads "
                        f"({' '.join(cmd[1:4])} ... failed: {tail})")
    (staging / "pins.txt").write_text("\n".join(pinned) + "\n")
    staging.rename(folder)


def environment() -> OtherPython:
    """The first other minor Python found, with PACKAGES at the versions installed here (made on first
    use); pytest.skip saying why where there is none."""
    from filelock import FileLock

    pinned = pins()
    tried = []
    for python in _candidates():
        version = _version_of(python)
        if version is None:
            tried.append(str(python))
            continue
        folder = _folder(version, pinned)
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder) + ".lock", timeout=INSTALL_TIMEOUT * 2):
            if not ((folder / "pins.txt").is_file() and (folder / "bin" / "python").exists()):
                shutil.rmtree(folder, ignore_errors=True)      # never made whole, or its Python is gone
                _make(python, folder, pinned)
        return OtherPython(folder / "bin" / "python", version)
    pytest.skip("no Python of another minor version than %d.%d here (looked for pyenv's versions and python3.N on "
                "PATH%s)" % (*sys.version_info[:2], f"; none of {', '.join(tried)} runs" if tried else ""))
