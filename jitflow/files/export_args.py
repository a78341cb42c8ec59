"""TVM's keyword arguments of `Executable.export_library` (`fcompile`, `fpack_imports`, `addons`,
`workspace_dir`, and the others TVM hands on to `fcompile`), as jitflow's export takes them.

jitflow's export copies the library its build compiled, linked and checked: nothing is compiled,
packed or linked at export time. So TVM's defaults (None, no addons) are taken, as they ask for
nothing; `workspace_dir` (where TVM keeps the export's intermediate files) is taken and unused, as
the copy makes none; any other value is an InvalidInputError that names the argument, why it has
no meaning here and what to do instead, where TVM's code would have met a bare TypeError.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from ..errors import InvalidInputError

#: TVM's arguments that ask the export to do work, and why jitflow's export has none of it to do
_WHY = {
    "fcompile": "jitflow compiles and links the library when it builds it (zig cc), and the export copies "
                "that library; the build is chosen by jitflow.compile's arguments (target, host, cpu_level, ...)",
    "fpack_imports": "jitflow packs the device code and the other imports into the library when it builds it, "
                     "and the export copies that library",
    "addons": "jitflow links the library when it builds it, and the export copies that library; link other "
              "objects into a library of your own, loaded beside it",
}


def _shown(value: Any) -> str:
    text = getattr(value, "__qualname__", None) or repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(args: Mapping[str, Any]) -> None:
    """Refuse each TVM export_library argument that asks for work the copy does not do (see above)."""
    for name, value in args.items():
        if name == "workspace_dir":
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise InvalidInputError(f"export_library: workspace_dir={_shown(value)}: give a folder (a str or "
                                        "a path) or None; jitflow's export writes no intermediate files there")
            continue
        nothing = value is None or (name == "addons" and isinstance(value, (list, tuple)) and not value)
        if name in _WHY and nothing:
            continue
        why = _WHY.get(name)
        if why is None:
            raise InvalidInputError(f"export_library: {name}={_shown(value)}: TVM hands extra keyword arguments to "
                                    "fcompile, its compiler function, and jitflow's export compiles nothing (it "
                                    f"copies the library the build made): leave {name} out")
        raise InvalidInputError(f"export_library: {name}={_shown(value)}: {why}: leave {name} out (or pass None, "
                                "as TVM's default)")
