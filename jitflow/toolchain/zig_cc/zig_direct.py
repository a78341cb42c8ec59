"""The commands zig cc runs, asked for once and reused: compiles and links skip zig cc's own process.

`zig cc` is a driver: for a C file it runs `zig clang ...`, for a link `zig ld.lld ...`, after
bookkeeping of its own (its cache manifest, some 8 ms of CPU for a small file, 4 ms for a small
link). With ZIG_VERBOSE_CC / ZIG_VERBOSE_LINK set it prints the command it runs. A probe (a
one-line C file, compiled and linked once per process and set of flags in a folder of its own)
gives that command; each build then runs it with its own file names and folder. What zig adds
for its cache (a dependency file, an output in its cache folder) is left out or pointed at the
build's own file. Anything unexpected in what zig prints, or a path with a space (zig prints
commands unquoted), and the caller keeps to zig cc.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

PROBE = "jitflow_probe"
SOURCE, OBJECT, LIBRARY = f"{PROBE}.c", f"{PROBE}.o", f"{PROBE}.so"


@dataclass(frozen=True)
class Probe:
    """A command zig ran in the probe's `folder`, naming the probe's files; for a compile, also the
    command of clang's compiler proper (`zig -cc1 ...`) that clang's driver runs for it, if known."""

    folder: str
    command: tuple[str, ...]
    frontend: tuple[str, ...] = ()

    def compiler_proper(self) -> Probe | None:
        """The probe of clang's compiler proper (None if it is not known)."""
        return Probe(self.folder, self.frontend) if self.frontend else None

    def instantiate(self, cwd: str, names: dict[str, Sequence[str]]) -> list[str] | None:
        """The command for a build in `cwd`: each probe file name replaced by the build's names (a
        name may stand for several, such as a link's inputs); None if it cannot be made."""
        if _spaced(cwd) or any(_spaced(n) for given in names.values() for n in given):
            return None
        argv: list[str] = []
        for word in self.command:
            argv += list(names[word]) if word in names else [word.replace(self.folder, cwd)]
        return None if any(PROBE in word for word in argv) else argv


def _spaced(text: str) -> bool:
    return any(c.isspace() for c in text)


def _printed(zig: str, args: list[str], folder: str, env: dict[str, str], variable: str,
             prefix: str) -> list[str] | None:
    """The one command zig prints (with `variable` set) that starts with `prefix`, as words. zig
    prints its own path resolved (/proc/self/exe): a zig reached through a symbolic link (a linked
    virtual environment or home folder) prints the link's target, read here as `zig`."""
    try:
        proc = subprocess.run([zig, "cc", *args], cwd=folder, env=dict(env, **{variable: "1"}),
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    resolved = os.path.realpath(zig)
    prefixes = {prefix, prefix.replace(zig, resolved, 1)}
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(tuple(prefixes))]
    if proc.returncode != 0 or len(lines) != 1:
        return None
    words = lines[0].split(" ")
    return [zig if word == resolved else word for word in words]


def probe_compile(zig: str, flags: Callable[[Path], list[str]], env: Callable[[Path], dict[str, str]]) -> Probe | None:
    """The `zig clang` command zig cc runs for `flags(folder) -c SOURCE -o OBJECT`, less its
    dependency file, writing OBJECT itself (`env(local cache)` is zig's environment)."""
    with tempfile.TemporaryDirectory(prefix="jitflow-probe-") as folder, \
            tempfile.TemporaryDirectory(prefix="jitflow-probe-cache-") as local:
        if _spaced(folder) or _spaced(local):
            return None
        (Path(folder) / SOURCE).write_text("int jitflow_probe;\n")
        words = _printed(zig, [*flags(Path(folder)), "-c", SOURCE, "-o", OBJECT], folder, env(Path(local)),
                         "ZIG_VERBOSE_CC", f"{zig} clang ")
        if words is None:
            return None
        command: list[str] = []
        dropped = 0
        it = iter(words)
        for word in it:
            if word in ("-MD", "-MV"):
                continue
            if word == "-MF":          # zig's dependency file, in its cache
                next(it, None)
                dropped += 1
                continue
            command.append(word)
        if dropped != 1 or len(command) < 4 or command[2] != SOURCE or command[-2] != "-o" \
                or local not in command[-1]:
            return None
        command[-1] = OBJECT           # zig compiles into its cache, then copies: write the file at once
        if any(local in word for word in command):
            return None
        frontend = _frontend(command, folder, local, env(Path(local)))
    return Probe(folder, tuple(command), frontend)


def _frontend(command: list[str], folder: str, local: str, env: dict[str, str]) -> tuple[str, ...]:
    """The `zig -cc1 ...` command clang's driver runs for `command` (`-###` prints it): run directly,
    it skips the driver's work (some 2 ms of a small file's 15: arguments, toolchain lookup) and
    writes the same object. Empty if what the driver prints is not the one command expected."""
    try:
        proc = subprocess.run([command[0], command[1], "-###", *command[2:]], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=120)
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(' "') and '"-cc1"' in ln]
        words = shlex.split(lines[0]) if proc.returncode == 0 and len(lines) == 1 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    if len(words) < 4 or words[1] != "-cc1" or words.count(SOURCE) != 2 or words.count(OBJECT) != 1 \
            or words[words.index(OBJECT) - 1] != "-o" or any(_spaced(w) or local in w for w in words):
        return ()
    return tuple(words)


def probe_link(zig: str, flags: Callable[[Path], list[str]], before: Sequence[str], after: Sequence[str],
               env: Callable[[Path], dict[str, str]]) -> Probe | None:
    """The `zig ld.lld` command zig cc runs for `flags(folder) BEFORE OBJECT AFTER -o LIBRARY`."""
    with tempfile.TemporaryDirectory(prefix="jitflow-probe-") as folder, \
            tempfile.TemporaryDirectory(prefix="jitflow-probe-cache-") as local:
        if _spaced(folder) or _spaced(local):
            return None
        (Path(folder) / SOURCE).write_text("int jitflow_probe;\n")
        try:
            made = subprocess.run([zig, "cc", *flags(Path(folder)), "-c", SOURCE, "-o", OBJECT], cwd=folder,
                                  env=env(Path(local)), capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
        if made.returncode != 0:
            return None
        words = _printed(zig, [*flags(Path(folder)), *before, OBJECT, *after, "-o", LIBRARY], folder,
                         env(Path(local)), "ZIG_VERBOSE_LINK", "ld.lld ")
    if words is None or words.count(OBJECT) != 1 or words.count(LIBRARY) != 1 or any(local in w for w in words):
        return None
    return Probe(folder, (zig, *words))
