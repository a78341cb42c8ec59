"""`jitflow inspect SOURCE` and `jitflow inspect --diff A B`: see what a build runs.

SOURCE is FILE.py:NAME (a module, PrimFunc, function returning one, or a jitflow Executable;
built or found in the cache), a .so (what the binary holds), a cache entry folder or a cache key.
--shape binds shape symbols, --timeline and --html write the memory plan as Chrome trace events
and as a page; --b-pass-config and the other --b-* options build B of a --diff differently.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidInputError
from . import build_options
from .exit_codes import EXIT_NO, EXIT_OK

SECTIONS = ("host", "cuda", "ptx", "sass", "kernels", "memory")
#: exported symbols that mark a library made by TVM (tvm-ffi's, and older TVM's module context)
TVM_SYMBOLS = ("__tvm_ffi_", "__tvm_module_ctx", "__tvm_main__")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show the host code, kernels, launches and device allocations of a build",
                       description="Report what a build runs. SOURCE: FILE.py:NAME, a library (.so), "
                                   "a cache entry folder or a cache key (6+ hex digits). With --diff, the "
                                   "exit status is 1 when the two differ, as with diff.")
    p.add_argument("source", nargs="?", metavar="SOURCE")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two sources (schedules, pass configs)")
    p.add_argument("--section", choices=SECTIONS, help="print one part only")
    p.add_argument("--json", action="store_true", help="stable JSON (fields in docs/inspect.md)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=N[,NAME=N]",
                   help="bind shape symbols: every size, total and peak that depends only on them becomes a number")
    p.add_argument("--timeline", metavar="FILE.json",
                   help="write the memory plan as Chrome trace events (open in ui.perfetto.dev or chrome://tracing)")
    p.add_argument("--html", metavar="FILE.html",
                   help="write a self-contained page with the memory plan drawn (with --diff: both plans)")
    build_options.add(p)
    g = p.add_argument_group("options for B of --diff (B is built with A's build options, then these)")
    for flag, attr in B_FLAGS.items():
        g.add_argument(f"--b-{flag[2:]}", dest=f"b_{attr}", action="append" if attr in _REPEATED else "store",
                       default=[] if attr in _REPEATED else None, metavar="VALUE",
                       help=f"{flag} for B only" + (" (added to A's)" if attr == "pass_config" else ""))
    p.set_defaults(func=run)


#: the build options --diff can set for B alone (their --b-* form; where libraries are kept is one choice
#: for both), and the repeatable ones
B_FLAGS = {flag: attr for flag, attr in build_options.BUILD_FLAGS.items()
           if flag not in build_options.CACHE_FLAGS}
_REPEATED = ("arch", "pass_config", "device_option")


def b_args(args: argparse.Namespace) -> argparse.Namespace:
    """The arguments that build B: A's, with each --b-* option in place of A's (pass configs added)."""
    out = copy.copy(args)
    for attr in B_FLAGS.values():
        value = getattr(args, f"b_{attr}", None)
        if value in (None, []):
            continue
        setattr(out, attr, [*args.pass_config, *value] if attr == "pass_config" else value)
    return out


def _b_given(args: argparse.Namespace) -> list[str]:
    return [f"--b-{flag[2:]}" for flag, attr in B_FLAGS.items()
            if getattr(args, f"b_{attr}", None) not in (None, [])]


def _tvm_library(path: Path) -> None:
    """Refuse a file that is not a shared library made by jitflow or TVM (libm.so.6, a text file), or
    that is no longer whole (truncated), saying which, in the words `jitflow.load` uses."""
    from ..errors import LibraryFormatError
    from ..formats import elf
    from ..formats.elf_file import ElfFile, Truncated
    from ..runtime.library_file import LibraryFile

    try:
        with LibraryFile.open(path) as library:
            ElfFile(library.fd).extent()    # the headers, and whether the file holds what they describe
    except Truncated as exc:
        raise InvalidInputError(f"{path}: {exc}") from None       # as jitflow.load says it
    except LibraryFormatError as exc:
        raise InvalidInputError(f"{path} is not a shared library jitflow can read ({exc}); expected a library "
                                "built by jitflow or TVM, FILE.py:NAME or a cache key") from None
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        exported = elf.read(path).exported
    except LibraryFormatError:
        return                 # whole, but its symbol tables do not read: the report says so ("unreadable")
    if not any(name.startswith(TVM_SYMBOLS) for name in exported):
        raise InvalidInputError(f"{path} is not a library built by jitflow or TVM: it exports no TVM "
                                f"functions ({TVM_SYMBOLS[0]}*)")


def _reporter(source: str, args: argparse.Namespace) -> Callable[[], Any]:
    """What makes the Report for one SOURCE as the command line names it, after its checks: a module
    file is imported now (so that the outputs can be checked against it), built when called."""
    from ..report.gather import inspect_entry, inspect_library

    path_part, sep, _name = source.rpartition(":")
    if sep and path_part.endswith(".py"):
        return build_options.executable(source, args).inspect
    path = Path(source).expanduser()
    is_key = re.fullmatch(r"[0-9a-fA-F]{6,64}", source) is not None
    if path.is_file() or path.is_dir() or is_key:
        _built_already(source, args)
    if path.is_file():
        _tvm_library(path)
        return lambda: inspect_library(path, args.cache_dir)
    if path.is_dir() or is_key:
        return lambda: inspect_entry(source, args.cache_dir)
    if re.fullmatch(r"[0-9a-fA-F]{1,5}", source):
        raise InvalidInputError(_short_key(source, args.cache_dir))
    if sep or "/" in source or path.suffix:
        raise InvalidInputError(f"{source}: no such file")
    raise InvalidInputError(f"{source}: expected FILE.py:NAME, a library (.so), a cache entry folder or a key")


def _built_already(source: str, args: argparse.Namespace) -> None:
    """Refuse build options with a library, an entry folder or a key: what they inspect is built."""
    flags = [flag for flag in build_options.given(args) if flag != "--cache-dir"]
    if flags:
        one = len(flags) == 1
        raise InvalidInputError(f"{source} is built already: {', '.join(flags)} {'says' if one else 'say'} how to "
                                f"build FILE.py:NAME; leave {'it' if one else 'them'} out (--cache-dir names the "
                                "cache a key is looked up in)")


def _short_key(prefix: str, cache_dir: str | None) -> str:
    """Why a SOURCE of a few hex digits names nothing: no entry starts with it, or it is too short to pick one."""
    from ..cache.store.location import open_cache
    from ..config import resolve

    folders = open_cache(resolve(cache_dir=cache_dir, cache=True))
    count = len(folders.entry_folders(prefix.lower()))
    if not count:
        return (f"{prefix}: no such file, and no cache entry starts with {prefix} "
                f"(in {folders.configured.root}; `jitflow cache ls` lists the keys)")
    return (f"{prefix}: a cache key needs 6 or more hex digits; {count} "
            f"{'entry starts' if count == 1 else 'entries start'} with {prefix}: give more of its key "
            "(`jitflow cache ls` lists them)")


def report_of(source: str, args: argparse.Namespace) -> Any:
    """The Report for one SOURCE as the command line names it."""
    return _reporter(source, args)()


#: what --timeline and --html write, for their messages
_OUTPUTS = {"timeline": ("--timeline", "the timeline", "plan.json"), "html": ("--html", "the page", "plan.html")}


def _check_outputs(args: argparse.Namespace, sources: list[str]) -> None:
    """Refuse, before anything is built, an --html or --timeline path where the file cannot be
    written as export_library writes a library (a folder, a FIFO, a device there), that names an
    input (the module file, a file it imports, a library being inspected), or both naming one file."""
    from ..files.export_path import destination, loaded_sources

    inputs = [*loaded_sources(), *(s for s in sources if Path(s).is_file())]
    found = {}
    for attr, (flag, written, example) in _OUTPUTS.items():
        if getattr(args, attr):
            found[attr] = destination(getattr(args, attr), inputs, what=f"inspect {flag}", written=written,
                                      example=example)
    if len(found) == 2 and found["timeline"] == found["html"]:
        raise InvalidInputError(f"--timeline and --html both name {found['html']}: give each its own file")


def _write(args: argparse.Namespace, attr: str, text: str) -> str:
    from ..report.report import write_file

    flag, written, example = _OUTPUTS[attr]
    return str(write_file(getattr(args, attr), text, f"inspect {flag}", written, example))


def _no_source(rep: Any, name: str) -> str:
    """Why a report has no host C or CUDA source to show, in words that fit the report."""
    what = "host C" if name == "host" else "CUDA source"
    kind = (rep.target or {}).get("kind")
    if name == "cuda" and kind is not None and kind != "cuda":
        return (f"this build has no CUDA source: its target is {kind!r}, with no device code (host and kernels are "
                "all C: --section host shows them)")
    if rep.origin == "library":
        return (f"this report has no {what}: a library does not carry it; inspect the module (FILE.py:NAME) or "
                "its cache entry")
    if name == "cuda" and not rep.kernels:
        return "this build has no CUDA source: it has no device code"
    return f"this report has no {what}: its build folder does not keep it"


def _device_text(mapping: Any, what: str) -> dict[str, str]:
    if not len(mapping):
        raise InvalidInputError(f"this build has no {what}")
    return {arch: mapping[arch] for arch in mapping}


def section(rep: Any, name: str, as_json: bool) -> str:
    """One part of the report, as text or JSON."""
    from ..report import report as report_text

    if name in ("host", "cuda"):
        text = rep.host_c if name == "host" else rep.cuda
        if text is None:
            raise InvalidInputError(_no_source(rep, name))
        return json.dumps({"host_c" if name == "host" else "cuda": text}) if as_json else text
    if name in ("ptx", "sass"):
        texts = _device_text(rep.ptx if name == "ptx" else rep.sass, name.upper())
        if as_json:
            return json.dumps({name: texts}, indent=1, sort_keys=True)
        return "\n".join(f"// ---- {name.upper()} {arch} ----\n{text}" for arch, text in texts.items())
    d = rep.to_dict(sources=False)
    if name == "kernels":
        if as_json:
            return json.dumps({"kernels": d["kernels"], "fatbin": d["fatbin"], "compatibility": d["compatibility"]},
                              indent=1, sort_keys=True)
        return "\n".join(report_text.header(rep) + [""] + report_text.kernels_section(rep))
    if as_json:
        keys = ("allocations", "allocation_totals", "copies", "symbols", "model", "shape")
        return json.dumps({k: d[k] for k in keys}, indent=1, sort_keys=True)
    return "\n".join(report_text.memory_section(rep) + [""] + report_text.host_section(rep))


def _b_value(args: argparse.Namespace, flag: str) -> str:
    value = getattr(args, "b_" + B_FLAGS["--" + flag[len("--b-"):]])
    return ",".join(value) if isinstance(value, list) else str(value)


def _shape(args: argparse.Namespace) -> dict[str, int]:
    from ..report.evaluate import parse_shape

    shape: dict[str, int] = {}
    for text in args.shape:
        shape.update(parse_shape(text))
    return shape


def _at_shape(rep: Any, shape: dict[str, int]) -> Any:
    return rep.evaluate(**shape) if shape else rep


def _written(path: str, what: str) -> None:
    print(f"wrote {path} ({what})", file=sys.stderr)


def _diff(args: argparse.Namespace, shape: dict[str, int]) -> int:
    from ..report import page
    from ..report.diff import diff

    if args.source:
        raise InvalidInputError("give either SOURCE or --diff A B, not both")
    if args.timeline:
        raise InvalidInputError("--timeline writes one plan: give SOURCE instead of --diff A B (or use --html)")
    a, b = args.diff
    make_a, make_b = _reporter(a, args), _reporter(b, b_args(args))
    _check_outputs(args, [a, b])
    ra, rb = _at_shape(make_a(), shape), _at_shape(make_b(), shape)
    label_b = b + "".join(f" {flag} {_b_value(args, flag)}" for flag in _b_given(args))
    result = diff(ra, rb, a, label_b)
    if args.html:
        written = _write(args, "html", page.document(f"jitflow inspect --diff {a} {label_b}{ra.at}",
                                                     ra.plans("a: ") + rb.plans("b: "), str(result)))
        _written(written, "both memory plans, on one scale")
    print(result.to_json() if args.json else result)
    return EXIT_NO if result.changed else EXIT_OK


def run(args: argparse.Namespace) -> int:
    shape = _shape(args)
    if not args.diff and _b_given(args):
        raise InvalidInputError(f"{', '.join(_b_given(args))} apply to B of --diff A B")
    if args.diff:
        return _diff(args, shape)
    if not args.source:
        raise InvalidInputError("jitflow inspect needs a SOURCE (FILE.py:NAME, a .so, a cache key) or --diff A B")
    from ..report.report import render

    make = _reporter(args.source, args)
    _check_outputs(args, [args.source])
    rep = _at_shape(make(), shape)
    if args.timeline or args.html:
        from ..formats import chrome_trace

        pages = {"timeline": (lambda: chrome_trace.dumps(rep.timeline()),
                              "Chrome trace events: open in https://ui.perfetto.dev or chrome://tracing"),
                 "html": (rep.html, "the memory plan drawn")}
        for attr, (text, what) in pages.items():
            if getattr(args, attr):
                _written(_write(args, attr, text()), what)
        return EXIT_OK
    if args.section:
        print(section(rep, args.section, args.json))
    else:
        print(rep.to_json(sources=False) if args.json else render(rep, names="cli"))
    return EXIT_OK
