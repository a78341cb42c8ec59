"""The CPU and OS a library's host code is built for: supported triples, spellings, TVM's view of them.

Both hosts are 64-bit little-endian glibc Linux, which TVM's C code assumes (64-bit handles, the
DLTensor at byte 24 of a tensor object); pointer size and alignment are then the C compiler's
business, and zig is told the triple. TVM's "c" target has no triple option, so the host is named
to TVM by the keys TVM itself gives such a CPU.
"""
from __future__ import annotations

import json
import platform
from typing import Any

from ..errors import LoadError, TargetError
from ..text.format import article

#: Triples jitflow builds host code for; each library needs glibc 2.17 or newer (manylinux2014).
SUPPORTED_HOSTS = ("x86_64-linux-gnu", "aarch64-linux-gnu")
#: The host of a TargetSpec made by hand; jitflow.compile defaults to the machine's own host.
DEFAULT_HOST = "x86_64-linux-gnu"
#: The TVM "c" target config for each host (an Arm CPU carries the keys TVM gives one).
TVM_CONFIG = {"x86_64-linux-gnu": {"kind": "c"},
              "aarch64-linux-gnu": {"kind": "c", "keys": ["arm_cpu", "cpu"]}}
_ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}


def _supported() -> str:
    return ", ".join(SUPPORTED_HOSTS)


def machine_host() -> str | None:
    """The triple of the machine running this process, or None where jitflow cannot build for it."""
    arch = platform.machine().lower()
    triple = f"{_ARCH_ALIASES.get(arch, arch)}-linux-gnu"
    return triple if platform.system() == "Linux" and triple in SUPPORTED_HOSTS else None


def normalize(host: Any) -> str:
    """'aarch64-linux-gnu', 'aarch64-unknown-linux-gnu', 'arm64-linux-gnu', 'arm64' -> 'aarch64-linux-gnu'.

    A bare architecture (what `uname -m` prints: 'x86_64', 'aarch64', or macOS's 'arm64') names its
    Linux glibc triple, the only OS jitflow builds for. Anything else that is not one of
    SUPPORTED_HOSTS is a TargetError that lists them.
    """
    if not isinstance(host, str):
        raise TargetError(f"host must be a triple such as {SUPPORTED_HOSTS[-1]!r}, not {type(host).__name__}")
    parts = host.strip().lower().split("-")
    if len(parts) == 4 and parts[2:] == ["linux", "gnu"]:
        parts = [parts[0], *parts[2:]]          # drop the vendor: unknown, pc, none, conda, ...
    parts[0] = _ARCH_ALIASES.get(parts[0], parts[0])
    if len(parts) == 1 and parts[0]:
        parts += ["linux", "gnu"]               # a bare architecture
    triple = "-".join(parts)
    if triple not in SUPPORTED_HOSTS:
        guess = f"{parts[0]}-linux-gnu"
        hint = f"; did you mean {guess!r}?" if guess in SUPPORTED_HOSTS else ""
        raise TargetError(f"unsupported host {host!r}; supported hosts: {_supported()} "
                          f"(Linux with glibc 2.17 or newer){hint}")
    return triple


def from_tvm(value: Any) -> str | None:
    """The triple a TVM host target names (an llvm target's mtriple, or a bare triple), else None.

    value: None, a triple, "c", "llvm", JSON text, or a plain dict of a TVM target config.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                return from_tvm(json.loads(text))
            except json.JSONDecodeError as exc:
                raise TargetError(f"host target {value!r} is not valid JSON: {exc}") from None
        return None if text in ("c", "llvm") else normalize(text)
    if isinstance(value, dict):
        kind = value.get("kind")
        if kind == "llvm":
            return normalize(value["mtriple"]) if value.get("mtriple") else None
        if kind == "c":
            return None
        raise TargetError(f"unsupported host target kind {kind!r}; name the host by its triple: {_supported()}")
    raise TargetError(f"the target's host must be a triple, a dict or a tvm.target.Target, "
                      f"not {type(value).__name__}")


def resolve(host: Any, from_target: str | None) -> str:
    """host= if given (it must agree with the target's own host), else the target's, else this machine's."""
    if host is not None:
        host = normalize(host)
        if from_target is not None and from_target != host:
            raise TargetError(f"host={host!r} disagrees with the target's host {from_target!r}; give one of them")
        return host
    if from_target is not None:
        return from_target
    native = machine_host()
    if native is None:
        raise TargetError(f"this machine ({platform.machine()}, {platform.system()}) is not a host jitflow "
                          f"builds for; pass host= one of {_supported()}")
    return native


def check_runs_here(host: str) -> None:
    """Raise LoadError when a library for `host` cannot be loaded by this process (another CPU)."""
    here = machine_host()
    if host != here:
        raise LoadError(f"this library is built for {host} and cannot be loaded on this machine "
                        f"({here or platform.machine()}); use export_library() and load it on "
                        f"{article(host)} {host} machine")
