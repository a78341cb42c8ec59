"""`jitflow build FILE.py:NAME --target cuda --arch sm_90 [--host TRIPLE] -o out.so`: ahead-of-time builds."""
from __future__ import annotations

import argparse

from ..target import SUPPORTED_HOSTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a module from a Python file into a shared library",
                       description="Build FILE.py:NAME (an IRModule, a PrimFunc, or a function returning one).")
    p.add_argument("module", metavar="FILE.py:NAME")
    p.add_argument("--target", default="cuda", help="cuda or c (default: cuda)")
    p.add_argument("--arch", action="append",
                   help="CUDA arch, repeatable or comma-separated (sm_80,sm_90), or 'portable' (SASS for each GPU "
                        "generation, PTX for the oldest)")
    p.add_argument("--cuda-floor", default=None, metavar="X.Y",
                   help="oldest driver (CUDA version) the library must load on (default: the compiler's major, 13.0)")
    p.add_argument("--host", default=None, metavar="TRIPLE",
                   help=f"CPU and OS the library runs on: {' or '.join(SUPPORTED_HOSTS)} (default: this machine)")
    p.add_argument("--cuda-compiler", choices=["nvrtc", "nvcc"], default=None)
    p.add_argument("-o", "--output", required=True, help="the .so to write")
    p.add_argument("--no-cache", action="store_true", help="build without reading or writing the cache")
    p.set_defaults(func=run)


def archs_of(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [a.strip() for v in values for a in v.split(",") if a.strip()]


def run(args: argparse.Namespace) -> int:
    import jitflow

    from .module_file import load_module_spec

    mod = load_module_spec(args.module)
    exe = jitflow.compile(mod, args.target, arch=archs_of(args.arch), host=args.host,
                          cuda_compiler=args.cuda_compiler, cache=False if args.no_cache else None,
                          cuda_floor=args.cuda_floor)
    out = exe.export_library(args.output)
    print(f"{out}: {exe.build_info}")
    return 0
