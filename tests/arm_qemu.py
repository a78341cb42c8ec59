"""Running aarch64 CPU libraries under qemu with the commands docs/shipping.md gives ("Trying an Arm
CPU library on an x86-64 machine"), as written: the C test driver built for aarch64 by the ziglang
wheel's zig cc, and calls through it under `qemu-aarch64 -L ...`. The tests use the doc's commands,
so the doc's recipe is the one that runs."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, TESTS

ARM = "aarch64-linux-gnu"
DRIVER = TESTS / "data" / "ffi_driver.c"
SHIPPING = ROOT / "docs" / "shipping.md"
#: the end of the comment before the recipe's block in docs/shipping.md
RECIPE_MARK = "tests/targets/test_hosts.py runs it as written -->"


def recipe() -> list[str]:
    """The lines of the doc's recipe (its ```sh block), as written."""
    lines = SHIPPING.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(RECIPE_MARK))
    assert lines[at + 1] == "```sh", f"{SHIPPING.name}:{at + 2}: the qemu recipe is not a ```sh block"
    return lines[at + 2:lines.index("```", at + 2)]


def printed(lines: list[str]) -> str:
    """What the recipe's lines print, as their `# prints TEXT` comments say."""
    return "".join(m.group(1) + "\n" for line in lines if (m := re.search(r"# prints (.*)$", line)))


def _qemu_prefix() -> list[str]:
    """`qemu-aarch64 -L FOLDER` as the recipe runs it; skips the test where qemu or the folder is missing."""
    words = shlex.split(next(line for line in recipe() if line.startswith("qemu-aarch64 ")), comments=True)
    assert words[1] == "-L", words
    if shutil.which(words[0]) is None:
        pytest.skip("qemu-aarch64 is not installed (Debian: apt-get install qemu-user)")
    if not (Path(words[2]) / "lib" / "ld-linux-aarch64.so.1").exists():
        pytest.skip(f"no aarch64 glibc in {words[2]} for qemu to load (Debian: apt-get install libc6-arm64-cross)")
    return words[:3]


def run_recipe(lines: list[str], folder: Path, zig_cache: Path) -> subprocess.CompletedProcess:
    """Run recipe lines in `folder` (given a copy of ffi_driver.c) as a reader's shell would, with this
    interpreter as `python` and the test session's zig cache; skips the test without qemu."""
    _qemu_prefix()
    shutil.copyfile(DRIVER, folder / "ffi_driver.c")
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               ZIG_GLOBAL_CACHE_DIR=str(zig_cache), ZIG_LOCAL_CACHE_DIR=str(zig_cache))
    return subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


def build_driver(folder: Path, zig_cache: Path) -> list[str]:
    """The driver built for aarch64 in `folder` by the recipe's commands, as the command that runs it
    under qemu; skips the test without qemu."""
    lines = recipe()
    built = next(i for i, line in enumerate(lines) if "-o ffi_driver" in line)
    folder.mkdir(parents=True, exist_ok=True)
    proc = run_recipe(lines[:built + 1], folder, zig_cache)
    assert proc.returncode == 0, f"building the driver as docs/shipping.md says failed:\n{proc.stderr}"
    return [*_qemu_prefix(), str(folder / "ffi_driver")]


def call(driver: list[str], library: Path, arrays: list[np.ndarray], folder: Path,
         symbol: str = "__tvm_ffi_main") -> tuple[subprocess.CompletedProcess, list[np.ndarray]]:
    """Run `symbol` of `library` on float32 arrays; (the finished process, the arrays after the call)."""
    specs = []
    for n, array in enumerate(arrays):
        path = folder / f"arg{n}.bin"
        path.write_bytes(np.ascontiguousarray(array, "<f4").tobytes())
        specs.append("x".join(map(str, array.shape)) + f":{path}")
    proc = subprocess.run([*driver, str(library), symbol, *specs], capture_output=True, text=True, timeout=60)
    after = [np.fromfile(folder / f"arg{n}.bin", "<f4").reshape(a.shape) for n, a in enumerate(arrays)]
    return proc, after
