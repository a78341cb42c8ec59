"""Running aarch64 CPU libraries under qemu: the C test driver built for aarch64, and one call through it."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import TESTS

from jitflow.toolchain.zig_cc import zig as zig_cc

ARM = "aarch64-linux-gnu"
DRIVER = TESTS / "data" / "ffi_driver.c"


def sysroot() -> Path | None:
    """A folder holding an aarch64 glibc (Debian's libc6-arm64-cross), for qemu's -L."""
    for folder in (os.environ.get("QEMU_LD_PREFIX"), "/usr/aarch64-linux-gnu"):
        if folder and (Path(folder) / "lib" / "ld-linux-aarch64.so.1").exists():
            return Path(folder)
    return None


def build_driver(folder: Path, zig_cache: Path) -> list[str]:
    """The driver built for aarch64 in `folder`, as the command that runs it; skips the test without qemu."""
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        pytest.skip("qemu-aarch64 is not installed (Debian: apt-get install qemu-user)")
    root = sysroot()
    if root is None:
        pytest.skip("no aarch64 glibc for qemu to load (Debian: apt-get install libc6-arm64-cross)")
    import tvm_ffi.libinfo

    zig_cc.run(["-target", zig_cc.ZIG_TARGETS[ARM], "-O1", "-rdynamic",
                f"-I{tvm_ffi.libinfo.find_include_path()}", f"-I{tvm_ffi.libinfo.find_dlpack_include_path()}",
                str(DRIVER), "-ldl", "-lpthread", "-o", "ffi_driver"], cwd=folder, zig_cache=zig_cache)
    return [qemu, "-L", str(root), str(folder / "ffi_driver")]


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
