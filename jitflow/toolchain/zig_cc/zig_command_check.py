"""Whether a remembered zig command (probe_memo.py) is one jitflow itself would have kept: this zig,
the tool it runs for the request (`zig clang`, its compiler proper `zig -cc1`, `zig ld.lld`), and
only words of the shapes zig's driver and clang print for it.

A remembered command is run as the user on every build, so a memo read back is checked word by word:
the words jitflow asked for, flags of the families zig and clang emit (`-f...`, `-m...`, `-W...`
without a comma, `-O`, `-g`, `-target-feature +x`), defines of zig's own, the probe's file names,
and paths only inside zig's installation, zig's cache folder or the include folders asked for.
Anything else (a plugin, `-include`, `-Wl,` or `-Xlinker` options, a response file, another
program, an input or folder elsewhere) makes the memo unusable: it is asked of zig again. A command
that zig itself prints and that fails this check is simply not kept.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Sequence

from .zig_direct import LIBRARY, OBJECT, PROBE, SOURCE, Probe

#: flag families zig and clang print that never load code or name a file
_FLAG = re.compile(r"-f[A-Za-z0-9][A-Za-z0-9-]*(=[\w.,+-]+)?|-m[a-z0-9][a-z0-9-]*(=[\w.,+-]+)?|-W[a-z0-9=-]*"
                   r"|-O[0-3sz]?|-g[a-z0-9-]*|-dwarf-version=\d+|-debugger-tuning=\w+")
#: families inside those that do load code, instrument it or write files: never taken from a memo
_DENIED = re.compile(r"-f(no-)?(plugin|pass-plugin|profile|sanitize(?!=all$)|xray|instrument|patchable|embed|"
                     r"module|implicit-module|crash|time-trace|save|dump|coverage-mapping|use-ld|cs-profile|"
                     r"debug-info-for-profiling|openmp|record-command-line)|-mllvm")
_DEFINE = re.compile(r"NDEBUG|__GLIBC_MINOR__=\d+")
_NAME = re.compile(r"[\w][\w.+-]*")
_EXACT = frozenset({
    "--no-default-config", "-nostdinc", "-nostdsysteminc", "-nobuiltininc", "-c", "-cc1", "-emit-obj",
    "-disable-free", "-clear-ast-before-backend", "-disable-llvm-verifier", "-discard-value-names",
    "-vectorize-loops", "-vectorize-slp", "-shared", "-nostdlib", "-nodefaultlibs", "-enable-tlsdesc",
    # zig's ld.lld command
    "--error-limit=0", "--build-id=none", "--image-base=0", "--gc-sections", "--eh-frame-hdr", "-znow",
    "--no-undefined-version", "--as-needed", "--no-as-needed", "-L/", "--hash-style=gnu", "-Bsymbolic"})
#: options that take the next word, and what that word may be (paths are checked apart)
_VALUES: dict[str, Callable[[str], bool]] = {
    "-target": _NAME.fullmatch, "-triple": _NAME.fullmatch, "-target-cpu": _NAME.fullmatch,
    "-tune-cpu": _NAME.fullmatch, "-target-abi": _NAME.fullmatch,
    "-target-feature": re.compile(r"[+-][\w.-]+").fullmatch,
    "-D": _DEFINE.fullmatch, "-main-file-name": lambda w: w == SOURCE,
    "-mrelocation-model": re.compile(r"pic|static").fullmatch, "-pic-level": str.isdigit,
    "-ferror-limit": str.isdigit, "-x": re.compile(r"c|c-header").fullmatch,
    "-m": re.compile(r"elf_x86_64|aarch64linux|aarch64elf").fullmatch,
    "-mllvm": re.compile(r"-float-abi=\w+").fullmatch, "-z": re.compile(r"now|relro|noexecstack").fullmatch,
}
_PATH_OPTIONS = ("-isystem", "-I", "-resource-dir")
_TAKES_VALUE = frozenset({*_VALUES, *_PATH_OPTIONS, "-o", "-Xclang"})
_SPACE = re.compile(r"\s")
_FOLDER_MAPS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=", "-fcoverage-prefix-map=")
_FOLDER_NAMES = ("-fdebug-compilation-dir=", "-fcoverage-compilation-dir=")


def _under(path: str, roots: Sequence[str]) -> bool:
    if not os.path.isabs(path) or "/../" in path + "/" or _SPACE.search(path):
        return False
    path = os.path.normpath(path)
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class _Rules:
    """What the words of one request's command may be."""

    def __init__(self, zig: str, kind: str, asked: Sequence[str], folder: str, zig_cache: str) -> None:
        self.kind, self.folder = kind, folder
        words = [w.replace("<folder>", folder) for w in asked]
        self.asked = set(words)
        for w in words:
            if kind == "link" and w.startswith("-Wl,"):
                self.asked.update(w.split(",")[1:])       # what the driver hands the linker
        home = os.path.dirname(os.path.abspath(zig))
        includes = [w[2:] for w in words if w.startswith("-I") and len(w) > 2]
        self.headers = [os.path.join(home, "lib"), *includes]
        self.resource = [os.path.join(os.path.dirname(home), "lib", "clang")]
        self.inputs = [os.path.normpath(zig_cache)]
        self.outputs = {"compile": {OBJECT}, "link": {LIBRARY}}[kind]

    def word(self, w: str) -> bool:
        """Whether one word that takes no value may stand in the command."""
        if w in self.asked or w in _EXACT:
            return True
        if w.startswith(_FOLDER_MAPS):
            return w.split("=", 1)[1] == f"{self.folder}=."
        if w.startswith(_FOLDER_NAMES):
            return w.split("=", 1)[1] == self.folder
        if w.startswith("-D"):
            return bool(_DEFINE.fullmatch(w[2:]))
        if w.startswith("-I"):
            return _under(w[2:], self.headers)
        if w.startswith("/"):
            return self.kind == "link" and _under(w, self.inputs)
        return bool(_FLAG.fullmatch(w)) and not _DENIED.match(w)

    def value(self, option: str, w: str) -> bool:
        if option in ("-isystem", "-I"):
            return _under(w, self.headers)
        if option == "-resource-dir":
            return _under(w, self.resource)
        if option == "-o":
            return w in self.outputs
        if option == "-mllvm" and w in self.asked:
            return True                       # an LLVM option jitflow's own flags ask for
        return bool(_VALUES[option](w))


def _scan(words: Sequence[str], rules: _Rules, files: dict[str, int]) -> str | None:
    """Why `words` (a command less its program and tool) cannot be run, or None. `files`: how many
    times each probe file name must appear as a word of its own."""
    seen = {name: 0 for name in (SOURCE, OBJECT, LIBRARY)}
    inner: list[str] = []                 # what -Xclang hands the compiler proper
    it = iter(words)
    for w in it:
        if w in seen:
            seen[w] += 1
            continue
        if w in _TAKES_VALUE:
            value = next(it, None)
            if value is None:
                return f"{w} has no value"
            if w == "-Xclang":
                inner.append(value)
                continue
            if not rules.value(w, value):
                return f"{w} {value}"
            if w == "-o":
                seen[value] += 1
            continue
        if not rules.word(w):
            return w
    if any(seen[name] != files.get(name, 0) for name in seen):
        return f"the probe's files appear {seen}"
    return _scan(inner, rules, {}) if inner else None


def problem(probe: Probe, zig: str, kind: str, asked: Sequence[str], zig_cache: str) -> str | None:
    """Why `probe` is not a command jitflow would have kept for the request `kind` ("compile" or
    "link") with `asked` (the request's words, its folder written `<folder>`) of `zig`, or None."""
    folder = probe.folder
    if not os.path.isabs(folder) or any(c.isspace() for c in folder) \
            or not os.path.basename(folder).startswith("jitflow-probe-") or PROBE in folder:
        return f"its folder {folder!r} is not a probe's"
    tool = {"compile": "clang", "link": "ld.lld"}.get(kind)
    if len(probe.command) < 3 or probe.command[0] != zig or probe.command[1] != tool:
        return f"it does not run {zig} {tool}"
    rules = _Rules(zig, kind, asked, folder, zig_cache)
    files = {SOURCE: 1, OBJECT: 1} if kind == "compile" else {OBJECT: 1, LIBRARY: 1}
    why = _scan(probe.command[2:], rules, files)
    if why is not None:
        return f"its command has {why!r}"
    if not probe.frontend:
        return None
    if kind != "compile" or len(probe.frontend) < 3 or probe.frontend[1] != "-cc1" \
            or probe.frontend[0] not in (zig, os.path.realpath(zig)):
        return f"its compiler proper is not {zig} -cc1"
    why = _scan(probe.frontend[2:], rules, {SOURCE: 1, OBJECT: 1})     # and once as -main-file-name
    return None if why is None else f"its compiler proper has {why!r}"
