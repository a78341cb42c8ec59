"""The command line: one sub-command per module of this folder, gathered here."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..errors import JitflowError
from . import build, cache, doctor, inspect

#: each module defines register(subparsers); a sub-command sets `func(args) -> int`.
COMMAND_MODULES = (build, cache, doctor, inspect)


def parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = argparse.ArgumentParser(prog="jitflow", description="Build, cache, inspect and ship TVM libraries.")
    p.add_argument("--version", action="version", version=f"jitflow {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except JitflowError as exc:
        print(f"jitflow: error: {exc}", file=sys.stderr)
        return 1
