"""The build options that `build` and `inspect` share, declared once, and the Executable they make.

A new build option goes in add() and in executable() (and docs/cli.md): both commands then take it.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import InvalidInputError
from ..targets import SUPPORTED_HOSTS
from ..targets.spec import DEFAULT_TARGET

#: option -> attribute of the parsed arguments, for the options that decide how a module is built.
BUILD_FLAGS = {"--target": "target", "--arch": "arch", "--host": "host", "--cuda-compiler": "cuda_compiler",
               "--pass-config": "pass_config", "--device-option": "device_option",
               "--relax-pipeline": "relax_pipeline", "--cuda-floor": "cuda_floor", "--cpu-level": "cpu_level",
               "--no-cache": "no_cache", "--cache": "cache",
               "--cache-dir": "cache_dir", "--record": "record"}
#: the build options that say where the library is kept, not how it is built: taken with an Executable too
CACHE_FLAGS = ("--no-cache", "--cache", "--cache-dir", "--record")


def add(p: argparse.ArgumentParser) -> None:
    """Declare the build options on a sub-command's parser."""
    g = p.add_argument_group("build options (for FILE.py:NAME)")
    g.add_argument("--target", default=None, help=f"cuda or c (llvm is built as c) (default: {DEFAULT_TARGET})")
    g.add_argument("--arch", action="append", metavar="ARCH",
                   help="CUDA arch, repeatable or comma-separated: --arch sm_80,sm_90, or 'portable' (SASS for each "
                        "GPU generation, PTX for the oldest) (default: this machine's GPU)")
    g.add_argument("--cuda-floor", default=None, metavar="X.Y",
                   help="oldest driver (CUDA version) the library must load on (default: the compiler's major, "
                        "e.g. 13.0)")
    g.add_argument("--host", default=None, metavar="TRIPLE",
                   help=f"CPU and OS the library runs on: {' or '.join(SUPPORTED_HOSTS)} (default: this machine)")
    g.add_argument("--cpu-level", default=None, metavar="LEVEL",
                   help="how much of the CPU the host code may use: x86-64-v2, x86-64-v3, x86-64-v4; armv8.2-a, "
                        "neoverse-n1, neoverse-v1, neoverse-v2 (aarch64); native (this CPU); the library then "
                        "loads only on CPUs that have it (default: JITFLOW_CPU_LEVEL, else the baseline, which "
                        "every CPU of the architecture runs)")
    g.add_argument("--cuda-compiler", choices=["nvrtc", "nvcc"], default=None,
                   help="device compiler (default: JITFLOW_CUDA_COMPILER, else nvrtc)")
    g.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                   help="TVM PassContext option, repeatable (VALUE read as JSON where it can be): "
                        "--pass-config tirx.disable_storage_rewrite=true")
    g.add_argument("--device-option", action="append", default=[], metavar="FLAG",
                   help="extra NVRTC/nvcc flag, repeatable; write --device-option=-lineinfo")
    g.add_argument("--relax-pipeline", default=None, metavar="NAME",
                   help="Relax modules: a pipeline name of tvm.relax.get_pipeline (default: TVM's for the target)")
    g.add_argument("--no-cache", action="store_true", help="build without reading or writing the cache")
    g.add_argument("--cache", choices=["readonly"], default=None,
                   help="readonly: look the library up only; a miss is an error (exit status 3), nothing is "
                        "built and nothing is written under the cache folder (default: JITFLOW_CACHE)")
    g.add_argument("--record", default=None, metavar="FILE",
                   help="append the key of the library obtained to FILE as a JSON line, for `jitflow cache pack "
                        "--manifest FILE` (default: JITFLOW_RECORD)")
    g.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="the cache to use (default: JITFLOW_CACHE_DIR, else the user cache folder)")


def arch_list(values: list[str] | None) -> list[str] | None:
    """--arch values (repeated, comma-separated) as one list; None when --arch was not given."""
    if values is None:
        return None
    archs = [a.strip() for v in values for a in v.split(",") if a.strip()]
    if not archs:
        raise InvalidInputError("--arch is empty; give a CUDA arch such as --arch sm_90 (several: --arch sm_80,sm_90)")
    return archs


def pass_config(items: list[str]) -> dict[str, Any]:
    """--pass-config KEY=VALUE items as a dict; VALUE is JSON where it parses (true, 3, "x"), else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--pass-config {item}: expected KEY=VALUE, e.g. tirx.disable_vectorize=true")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def given(args: argparse.Namespace) -> list[str]:
    """The build options present on the command line."""
    return [flag for flag, attr in BUILD_FLAGS.items() if getattr(args, attr, None) not in (None, [], False)]


def _check_arch_use(target: str, archs: list[str] | None, defaulted: bool = False) -> None:
    """Say in command-line words what resolve_target would say in Python words, for a plain --target
    (defaulted: no --target was given, so the target is DEFAULT_TARGET)."""
    kind = target.strip().lower()
    if kind in ("c", "llvm") and archs is not None:
        raise InvalidInputError(f"--arch applies to --target cuda only; --target {kind} has no CUDA arch")
    if kind == "cuda" and archs is None:
        from ..targets import visible_gpu_arch

        if visible_gpu_arch() is None:
            default = f"no --target given, so the target is {DEFAULT_TARGET} (the default), and " if defaulted else ""
            raise InvalidInputError(f"{default}no --arch given and no GPU visible here to pick one from; "
                                    "pass --arch sm_90 (several: --arch sm_80,sm_90)"
                                    + (", or --target c to build for the CPU" if defaulted else ""))


def _has_relax(obj: Any) -> bool:
    import tvm

    from ..inputs.ir_module import is_relax

    return isinstance(obj, tvm.IRModule) and is_relax(obj)


def executable(spec: str, args: argparse.Namespace) -> Any:
    """The jitflow Executable that FILE.py:NAME and the build options describe.

    NAME may be an IRModule, a PrimFunc, a function returning one, or a jitflow Executable (whose
    target and options come from the file, so build options other than --no-cache and --cache-dir
    are refused with it).
    """
    from .. import executable
    from ..inputs import pass_context
    from .module_file import load_module_spec

    obj = load_module_spec(spec)
    if isinstance(obj, executable.Executable):
        flags = [flag for flag in given(args) if flag not in CACHE_FLAGS]
        if flags:
            raise InvalidInputError(f"{spec} is a jitflow Executable: its target and options are set in the "
                                    f"file; leave out {', '.join(flags)} or name the module instead")
        obj = obj.labelled(spec)        # `cache ls` shows the spec, as for a module, unless the file named it
        if args.no_cache or args.cache or args.cache_dir is not None or args.record is not None:
            return obj.with_cache(cache=_cache_mode(args), cache_dir=args.cache_dir, record=args.record)
        return obj
    target = args.target or DEFAULT_TARGET
    archs = arch_list(args.arch)
    _check_arch_use(target, archs, defaulted=args.target is None)
    if args.cpu_level is not None:
        from ..targets import cpu_level

        cpu_level.normalize(args.cpu_level, "--cpu-level")     # a misspelling in command-line words
    if args.relax_pipeline is not None and not _has_relax(obj):
        raise InvalidInputError(f"--relax-pipeline applies to modules with Relax functions; {spec} has none")
    options = pass_config(args.pass_config)
    pass_context.check_config(options, "--pass-config")      # in command-line words
    return executable.compile(obj, target, arch=archs, host=args.host, cuda_compiler=args.cuda_compiler,
                              pass_config=options, device_options=list(args.device_option),
                              cache=_cache_mode(args), cache_dir=args.cache_dir, record=args.record,
                              relax_pipeline=args.relax_pipeline, cuda_floor=args.cuda_floor,
                              cpu_level=args.cpu_level, name=spec)


def _cache_mode(args: argparse.Namespace) -> bool | str | None:
    """--no-cache (False) or --cache readonly, refused together; None: JITFLOW_CACHE."""
    if args.no_cache and args.cache:
        raise InvalidInputError("--no-cache and --cache readonly contradict each other; give one")
    return False if args.no_cache else args.cache
