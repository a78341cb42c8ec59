"""Runs one document's Python examples in one process, in order, in one namespace (as a reader
running them one after another would): each line of standard input names a script; for each, one
JSON line on standard output: {"ok": bool, "stdout": what it printed, "error": the traceback}.

One process per document keeps the docs test short: each example would otherwise pay for
importing TVM again.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")      # the results; examples print to a buffer
    namespace: dict = {"__name__": "__main__"}
    for line in sys.stdin:
        path = line.strip()
        printed = io.StringIO()
        ok, error = True, ""
        try:
            with contextlib.redirect_stdout(printed):
                code = compile(Path(path).read_text(), path, "exec")   # TVMScript reads the source it parses
                namespace["__file__"] = path
                exec(code, namespace)
        except BaseException:   # noqa: BLE001 - a failing example is reported, the next still runs
            ok, error = False, traceback.format_exc()
        out.write(json.dumps({"ok": ok, "stdout": printed.getvalue(), "error": error}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
