"""How Python code enters the cache key: by text that is the same under every Python version.

CPython's bytecode changes with its minor version (3.11 and 3.12 compile one function to other
bytes), while a library's bytes do not depend on the Python that built it; so code is never keyed
by its bytecode, but by where it comes from:

- code of TVM's installed package by its module and qualified name: TVM's version is in the key,
  and the files are those that version installed;
- code of Python's standard library by its name too: what it does is Python's, and decides no
  library's bytes by the minor version;
- any other code by its source text (the lines that define the function, decorators included, as
  `inspect.getsource` finds them, common indentation removed): the same wherever the same file is
  installed, whatever the Python.

A function whose source cannot be found (made by exec or eval, typed at the interactive prompt,
given to `python -c`) cannot be named: Unkeyable says so. The text is read once per process, when
a key first needs it: a file edited after the process imported it is read as edited.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
from functools import lru_cache
from typing import Any

#: whose code a file holds
TVM, PYTHON = "tvm", "python"
#: a folder of installed packages below the standard library's (a system Python's site-packages)
_INSTALLED = re.compile(r"(^|[\\/])(site|dist)-packages[\\/]")
_digests: dict[int, tuple[Any, str]] = {}   # id(code) -> (the code, held; the digest of its source)


class Unkeyable(Exception):
    """A registered function holds a value the key cannot name; the message says which and where."""


def qualified(obj: Any) -> str:
    """module.qualname of a function or class (its type's name for anything else)."""
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


@lru_cache(maxsize=1)
def _folders() -> tuple[str, str]:
    """TVM's installed package folder and the standard library's, each ending in a separator."""
    import tvm

    return os.path.dirname(tvm.__file__) + os.sep, os.path.dirname(os.__file__) + os.sep


@lru_cache(maxsize=None)
def home(filename: str) -> str | None:
    """Whose code the file holds: TVM (its installed package), PYTHON (the standard library), or
    None (anyone's: named by its source)."""
    if filename.startswith("<frozen "):          # the standard library's modules frozen into Python
        return PYTHON
    tvm_folder, stdlib = _folders()
    if filename.startswith(tvm_folder):
        return TVM
    if filename.startswith(stdlib) and not _INSTALLED.search(filename[len(stdlib):]):
        return PYTHON
    return None


def class_home(cls: type) -> str | None:
    """home() of the module that defines a class: C types of Python's own (builtins, `_thread`) too."""
    name = getattr(cls, "__module__", None) or ""
    module = sys.modules.get(name)
    filename = getattr(module, "__file__", None)
    if isinstance(filename, str):
        return home(filename)
    return PYTHON if name.partition(".")[0] in sys.stdlib_module_names or name in sys.builtin_module_names else None


def source_digest(code: Any, name: str, where: str) -> str:
    """The sha256 (16 hex digits) of the source text of a function's code, memoized per code object;
    Unkeyable (saying that `where` is `name`) when its source cannot be found."""
    known = _digests.get(id(code))
    if known is not None and known[0] is code:
        return known[1]
    import inspect
    import textwrap

    try:
        text = textwrap.dedent(inspect.getsource(code))   # the code's own lines, never a __wrapped__ one's
    except (OSError, TypeError):
        raise Unkeyable(f"{where} is {name}, whose source text cannot be found (a function made by exec or eval, "
                        "typed at the interactive prompt or given to python -c): define it in a file") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    _digests[id(code)] = (code, digest)
    return digest


def function_text(fn: Any, code: Any, where: str) -> str:
    """How a Python function's code is named: TVM's and Python's own by module.qualname; any other by
    module.qualname and the digest of its source text."""
    name = qualified(fn)
    if home(code.co_filename) is not None:
        return name
    return f"{name} source {source_digest(code, name, where)}"
