"""The exit status of every command (docs/cli.md lists them); main.py maps errors onto them."""
from __future__ import annotations

from ..errors import InvalidInputError, JitflowError

#: success
EXIT_OK = 0
#: a "no" answer: inspect --diff found differences, doctor or cache info found a problem (as diff,
#: git diff --exit-code)
EXIT_NO = 1
#: a usage or input error: argparse's own code, and jitflow's InvalidInputError (bad argument,
#: setting, FILE.py:NAME, or a file that is not a TVM library)
EXIT_USAGE = 2
#: the work failed: any other jitflow error (compiler, lowering, schedule, missing tool, cache, load), or a bug
EXIT_FAILED = 3
#: interrupted by Ctrl-C (128 + SIGINT)
EXIT_INTERRUPTED = 130
#: standard output closed early (`jitflow inspect ... | head`), as a process killed by SIGPIPE reports
EXIT_PIPE = 141


def for_error(exc: JitflowError) -> int:
    """The exit status for a jitflow error: bad input is a usage error, anything else a failure."""
    return EXIT_USAGE if isinstance(exc, InvalidInputError) else EXIT_FAILED
