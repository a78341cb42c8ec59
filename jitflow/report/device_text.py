"""Readable device code for a report, made on first access: PTX per arch and SASS per arch.

PTX: the fatbin keeps PTX for the lowest arch only, and compressed, so the PTX of each arch is
made again from the kept CUDA source with the compiler and options of the build (the same PTX
ptxas turned into that arch's SASS). SASS: the fatbin's cubins disassembled by nvdisasm or
cuobjdump where a CUDA toolkit (or NVIDIA's nvdisasm wheel) provides one; where none is found,
asking for SASS raises ToolMissingError saying so.
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import CompileError, InvalidInputError, JitflowError
from ..targets import normalize_arch
from ..toolchain.cuda import cuda_toolkit, device_compiler

SASS_TOOLS: tuple[cuda_toolkit.Tool, ...] = ("nvdisasm", "cuobjdump")
#: seconds a disassembler may take for one cubin (nvdisasm takes well under one for a model's kernels)
SASS_TIMEOUT_S = 120.0
SASS_MISSING = ("SASS text: needs nvdisasm or cuobjdump (a CUDA toolkit, or pip install 'jitflow[sass]', which "
                "brings NVIDIA's nvidia-cuda-nvdisasm); "
                f"neither is in {cuda_toolkit.WHERE}")


class DeviceText(Mapping[str, str]):
    """arch -> text, made by `make(arch)` on first access and kept; `note` says why it may fail."""

    def __init__(self, what: str, archs: Sequence[str], make: Callable[[str], str], note: str | None = None) -> None:
        self.what = what
        self._archs = list(archs)
        self._make = make
        self._done: dict[str, str] = {}
        self.note = note

    def _key(self, arch: str) -> str:
        try:
            key = normalize_arch(arch)
        except JitflowError:
            key = arch
        if key not in self._archs:
            have = ", ".join(self._archs) or "none"
            raise InvalidInputError(f"no {self.what} for {arch!r}; archs with {self.what}: {have}")
        return key

    def __getitem__(self, arch: str) -> str:
        key = self._key(arch)
        if key not in self._done:
            self._done[key] = self._make(key)
        return self._done[key]

    def __contains__(self, arch: object) -> bool:
        try:
            self._key(str(arch))
            return True
        except JitflowError:
            return False

    def get(self, arch: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self[arch] if arch in self else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._archs)

    def __len__(self) -> int:
        return len(self._archs)

    def __repr__(self) -> str:
        return f"<{self.what} for {', '.join(self._archs) or 'no arch'}{'; ' + self.note if self.note else ''}>"


def find_sass_tool() -> tuple[str, str] | None:
    """(tool name, path) of nvdisasm or cuobjdump (toolchain/cuda/cuda_toolkit.py finds them), or None."""
    for name in SASS_TOOLS:
        path = cuda_toolkit.find(name)
        if path is not None:
            return name, path
    return None


def disassemble(cubin: bytes, tool: tuple[str, str]) -> str:
    """SASS text of a cubin with nvdisasm or cuobjdump: CompileError where the tool fails or gives no
    answer within SASS_TIMEOUT_S (it is then killed). Its output is read as UTF-8, any byte that is
    not shown as U+FFFD: a disassembler's text is for reading, and one bad byte must not lose it."""
    name, path = tool
    with tempfile.TemporaryDirectory(prefix="jitflow-sass-") as tmp:
        file = Path(tmp) / "kernels.cubin"
        file.write_bytes(cubin)
        cmd = [path, "-c", str(file)] if name == "nvdisasm" else [path, "-sass", str(file)]
        out, err, code = _run(name, cmd)
    if code != 0:
        raise CompileError(name, cmd, out + err)
    return out


def _run(name: str, cmd: list[str]) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of a disassembler, run in a process group of its own so that
    one that does not answer within SASS_TIMEOUT_S is stopped with whatever it started."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        raise CompileError(name, cmd, f"cannot run it: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(timeout=SASS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        raise CompileError(name, cmd, f"{_text(out)}{_text(err)}\n(no answer within {SASS_TIMEOUT_S:g} s: "
                           f"stopped; a disassembler that hangs is a broken install: reinstall it, or remove it "
                           f"from {cuda_toolkit.WHERE})") from None
    return _text(out), _text(err), proc.returncode


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def ptx_from_source(source: str, arch: str, compiler: str, options: Sequence[str] = (),
                    tvm_cuda: dict[str, Any] | None = None) -> str:
    """The PTX the build's compiler makes from `source` for `arch` (the input of that arch's SASS),
    with the build's options and the TVM_CUDA_* settings its key recorded (`tvm_cuda`)."""
    from ..toolchain.cuda.cuda_flags import recorded

    return device_compiler.ptx(source, arch, compiler, options, recorded(tvm_cuda or {}, compiler))


def readable_ptx(data: bytes) -> str | None:
    """PTX text of a fatbin entry, or None where it is stored compressed. The blank lines the
    compiler's comments left at its top are dropped."""
    try:
        text = data.rstrip(b"\0").decode("ascii").lstrip("\r\n")
    except UnicodeDecodeError:
        return None
    return text if ".version" in text and ".target" in text else None
