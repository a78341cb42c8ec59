"""`jitflow inspect SOURCE` and `jitflow inspect --diff A B`: see what a build runs.

SOURCE is FILE.py:NAME (a module, PrimFunc, function returning one, or a jitflow Executable;
built or found in the cache), a .so (what the binary holds), a cache entry folder or a cache key.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

SECTIONS = ("host", "cuda", "ptx", "sass", "kernels", "memory")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show the host code, kernels, launches and device allocations of a build",
                       description="Report what a build runs. SOURCE: FILE.py:NAME, a library (.so), "
                                   "a cache entry folder or a cache key (6+ hex digits).")
    p.add_argument("source", nargs="?", metavar="SOURCE")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two sources (schedules, pass configs)")
    p.add_argument("--target", default="cuda", help="for FILE.py:NAME: cuda or c (default: cuda)")
    p.add_argument("--arch", action="append", help="CUDA arch, repeatable or comma-separated (sm_80,sm_90)")
    p.add_argument("--host", default=None, metavar="TRIPLE", help="CPU and OS of the library (default: this machine)")
    p.add_argument("--cuda-compiler", choices=["nvrtc", "nvcc"], default=None)
    p.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                   help="TVM PassContext option for FILE.py:NAME (VALUE read as JSON where it can be)")
    p.add_argument("--no-cache", action="store_true", help="build without reading or writing the cache")
    p.add_argument("--section", choices=SECTIONS, help="print one part only")
    p.add_argument("--json", action="store_true", help="stable JSON (fields in docs/inspect.md)")
    p.set_defaults(func=run)


def _pass_config(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--pass-config {item!r}: expected KEY=VALUE, e.g. tir.disable_vectorize=true")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def report_of(source: str, args: argparse.Namespace) -> Any:
    """The Report for one SOURCE as the command line names it."""
    from ..report.gather import inspect_entry, inspect_library

    path_part, sep, _name = source.rpartition(":")
    if sep and path_part.endswith(".py"):
        import jitflow

        from .build import archs_of
        from .module_file import load_module_spec

        obj = load_module_spec(source)
        if isinstance(obj, jitflow.Executable):
            return obj.inspect()
        exe = jitflow.compile(obj, args.target, arch=archs_of(args.arch), host=args.host,
                              cuda_compiler=args.cuda_compiler, pass_config=_pass_config(args.pass_config),
                              cache=False if args.no_cache else None)
        return exe.inspect()
    path = Path(source).expanduser()
    if path.is_file():
        return inspect_library(path)
    if path.is_dir() or re.fullmatch(r"[0-9a-fA-F]{6,64}", source):
        return inspect_entry(source)
    raise InvalidInputError(f"{source!r}: expected FILE.py:NAME, a library (.so), a cache entry folder or a key")


def _device_text(mapping: Any, what: str) -> dict[str, str]:
    if not len(mapping):
        raise InvalidInputError(f"this build has no {what}")
    return {arch: mapping[arch] for arch in mapping}


def section(rep: Any, name: str, as_json: bool) -> str:
    """One part of the report, as text or JSON."""
    from ..report import text as report_text

    if name in ("host", "cuda"):
        text = rep.host_c if name == "host" else rep.cuda
        if text is None:
            raise InvalidInputError(f"this report has no {'host C' if name == 'host' else 'CUDA source'} "
                                    "(a library inspected without its sources)")
        return json.dumps({"host_c" if name == "host" else "cuda": text}) if as_json else text
    if name in ("ptx", "sass"):
        texts = _device_text(rep.ptx if name == "ptx" else rep.sass, name.upper())
        if as_json:
            return json.dumps({name: texts}, indent=1, sort_keys=True)
        return "\n".join(f"// ---- {name.upper()} {arch} ----\n{text}" for arch, text in texts.items())
    d = rep.to_dict(sources=False)
    if name == "kernels":
        if as_json:
            return json.dumps({"kernels": d["kernels"], "fatbin": d["fatbin"]}, indent=1, sort_keys=True)
        return "\n".join(report_text.header(rep) + [""] + report_text.kernels_section(rep))
    if as_json:
        keys = ("allocations", "allocation_totals", "copies", "symbols", "model")
        return json.dumps({k: d[k] for k in keys}, indent=1, sort_keys=True)
    return "\n".join(report_text.memory_section(rep) + [""] + report_text.host_section(rep))


def run(args: argparse.Namespace) -> int:
    if args.diff:
        if args.source:
            raise InvalidInputError("give either SOURCE or --diff A B, not both")
        from ..report.diff import diff

        a, b = args.diff
        result = diff(report_of(a, args), report_of(b, args), a, b)
        print(result.to_json() if args.json else result)
        return 0
    if not args.source:
        raise InvalidInputError("jitflow inspect needs a SOURCE (FILE.py:NAME, a .so, a cache key) or --diff A B")
    rep = report_of(args.source, args)
    if args.section:
        print(section(rep, args.section, args.json))
    else:
        print(rep.to_json(sources=False) if args.json else rep)
    return 0
