"""The command line: one sub-command per module (cli_*.py), gathered here."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import JitflowError

#: modules that each define register(subparsers); a sub-command sets `func(args) -> int`.
COMMAND_MODULES = ["jitflow.cli_build", "jitflow.cli_cache", "jitflow.cli_doctor", "jitflow.cli_inspect"]


def parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="jitflow", description="Build, cache, inspect and ship TVM libraries.")
    p.add_argument("--version", action="version", version=f"jitflow {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
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
