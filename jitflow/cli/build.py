"""`jitflow build FILE.py:NAME --target cuda --arch sm_90 [--host TRIPLE] -o out.so`: ahead-of-time builds."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import build_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a module from a Python file into a shared library",
                       description="Build FILE.py:NAME (an IRModule, a PrimFunc, a jitflow Executable, or a "
                                   "function without arguments returning one) into a library.")
    p.add_argument("module", metavar="FILE.py:NAME")
    p.add_argument("-o", "--output", required=True, help="the .so to write (a .tar, .o, .a or .zip name is refused)")
    build_options.add(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..files.export_path import check_library_name, destination, loaded_sources, stream_of

    check_library_name(Path(args.output), "-o")    # before importing the module file: x.tar is never written
    exe = build_options.executable(args.module, args)
    destination(args.output, loaded_sources())   # before building: never over the module file or what it imports
    exe.export_library(args.output)
    level = exe.options.cpu_level
    say = sys.stderr if stream_of(args.output) is not None else sys.stdout    # the library went to standard output
    print(f"{args.output}: {exe.build_info}" + (f"; CPU level {level.describe()}" if level else ""),   # as -o named it
          file=say)
    return 0
