"""PTX text: its ISA version (the `.version` directive) and target, and lowering the declared version.

Lowering only rewrites the directive; whether the code is valid at the lower ISA is for ptxas to
say (toolchain/cuda/ptx_floor.py assembles it at that ISA before a library ships it).
"""
from __future__ import annotations

import re

from ..errors import LibraryFormatError

_VERSION = re.compile(rb"^[ \t]*\.version[ \t]+(\d+)\.(\d+)[ \t]*$", re.M)
_TARGET = re.compile(rb"^[ \t]*\.target[ \t]+([\w, ]+?)[ \t]*$", re.M)


def isa(ptx: bytes | str) -> tuple[int, int]:
    """The PTX ISA version the text declares: (9, 0) for `.version 9.0`."""
    data = ptx.encode() if isinstance(ptx, str) else ptx
    m = _VERSION.search(data)
    if m is None:
        raise LibraryFormatError("PTX text without a .version directive")
    return int(m.group(1)), int(m.group(2))


def target(ptx: bytes | str) -> str:
    """The first word of the `.target` directive: 'sm_80' (the arch the PTX is written for)."""
    data = ptx.encode() if isinstance(ptx, str) else ptx
    m = _TARGET.search(data)
    if m is None:
        raise LibraryFormatError("PTX text without a .target directive")
    return m.group(1).split(b",")[0].strip().decode()


def with_isa(ptx: bytes, version: tuple[int, int]) -> bytes:
    """The text with its `.version` directive set to `version` (nothing else changes)."""
    isa(ptx)
    return _VERSION.sub(f".version {version[0]}.{version[1]}".encode(), ptx, count=1)
