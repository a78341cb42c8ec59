"""The command line: one sub-command per module of this folder, gathered here, and the one place that
turns errors into exit codes (docs/cli.md lists them)."""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from ..errors import JitflowError
from . import build, cache, doctor, inspect
from .exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_PIPE, EXIT_USAGE, for_error

#: each module defines register(subparsers); a sub-command sets `func(args) -> int`.
COMMAND_MODULES = (build, cache, doctor, inspect)


def parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = argparse.ArgumentParser(prog="jitflow", description="Build, cache, inspect and ship TVM libraries.",
                                epilog="Exit status: 0 success, 1 differences or problems found, 2 usage or "
                                       "input error, 3 the build or another step failed (docs/cli.md).")
    p.add_argument("--version", action="version", version=f"jitflow {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def _command_parser(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the sub-command the arguments name (`cache ls`'s for `jitflow cache ls ...`)."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
            return _command_parser(action.choices[getattr(args, action.dest)], args)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:     # said with the sub-command's usage (argparse would show only the top-level one)
        _command_parser(p, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        p.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()   # a closed pipe shows here, inside the handler, not at exit
        return code
    except JitflowError as exc:
        print(f"jitflow: error: {exc}", file=sys.stderr)
        return for_error(exc)
    except KeyboardInterrupt:
        print("jitflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `jitflow inspect ... | head`: the reader has gone; say nothing more and write nowhere at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE
    except Exception:   # not bad input (that is a JitflowError): a bug, shown whole so it can be reported
        traceback.print_exc()
        print("jitflow: internal error (the traceback above is a bug in jitflow: please report it)",
              file=sys.stderr)
        return EXIT_FAILED
