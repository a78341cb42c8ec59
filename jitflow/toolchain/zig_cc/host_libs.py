"""What a host library is linked against, without zig's seconds-long first-use work.

zig's default link builds glibc stubs and its whole compiler runtime into an empty zig cache
(seconds, tens of seconds on a busy machine) for a library that needs neither: it is loaded into a
process that already has libc and libm, and TVM's C needs at most three compiler builtins. So a
library is linked with -nostdlib against:
- stub libc.so.6 and libm.so.6 that carry only their soname: the library records them as needed
  and its references stay unversioned, which glibc's loader binds to the oldest version of each
  symbol (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on aarch64): the same symbols a link against glibc
  2.17's stubs picks, so the library loads on glibc 2.17 and on every later one;
- an archive of the half-precision conversions (builtins_c.py), pulled in only when used.
Any other compiler-rt builtin in the objects (128-bit division, say) makes the link use zig's
compiler runtime after all: correct always, fast whenever TVM's C allows.

The stubs and the archive are built once per zig cache folder and host (milliseconds; the archive
only once a library needs it), under names that change with their recipe.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from ...errors import CacheError
from ...files import kept_file
from ...formats import elf
from ...logs import warn_once
from . import builtins_c, zig

STUBS = ("libc.so.6", "libm.so.6")
ARCHIVE = "libjitflow_builtins.a"
_STUB_RECIPE = hashlib.sha256("\n".join(["stubs: soname only", *STUBS]).encode()).hexdigest()[:16]
_SYMBOL_RE = re.compile(r'symbol\(&?[A-Za-z0-9_.]+,\s*"(__[A-Za-z0-9_]+)"\)')
#: glibc functions that compiler-rt also defines (fortified string functions): the stub libc has them.
_LIBC_NAMES = re.compile(r"__\w+_chk|__chk_fail|__stack_chk_\w+")


def stubs(host: str, zig_cache: Path) -> list[Path]:
    """The stub libc.so.6 and libm.so.6 for `host`, built once per zig cache folder."""
    folder = made_once(zig_cache / "jitflow-host-libs" / f"stubs-{_STUB_RECIPE}" / host, STUBS,
                        lambda work, local: _build_stubs(work, local, host, zig_cache), zig_cache)
    return [folder / name for name in STUBS]


def builtins_archive(host: str, zig_cache: Path) -> Path:
    """The archive of builtins_c.py for `host`, built once per zig cache folder."""
    recipe = hashlib.sha256("\n".join([builtins_c.SOURCE, *zig.flags(host, Path("/"))]).encode()).hexdigest()[:16]
    folder = made_once(zig_cache / "jitflow-host-libs" / f"builtins-{recipe}" / host, (ARCHIVE,),
                        lambda work, local: _build_archive(work, local, host, zig_cache), zig_cache)
    return folder / ARCHIVE


MANIFEST = "sha256.json"


def _digests(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}


#: bounds on what a kept folder's manifest and files may weigh (a manifest is a few lines; the
#: largest file kept, the builtins archive or an entry functions' object, some hundreds of kilobytes)
MANIFEST_MAX_BYTES, FILE_MAX_BYTES = 1 << 16, 1 << 28


def _verified(target: Path, names: tuple[str, ...], root: Path | None = None) -> bool:
    """Whether `target` holds `names` with the sha256 recorded when they were made (files linked
    into every library are checked like cache entries: a changed or damaged one is made again).
    Each is read back as untrusted input (files/kept_file.py: a regular file of this user in a
    folder of this user that no one else can write, not a link or a FIFO, bounded in size; with
    `root`, every folder from it down is checked so)."""
    recorded = kept_file.read_json(target / MANIFEST, MANIFEST_MAX_BYTES, root)
    if not isinstance(recorded, dict) or sorted(recorded) != sorted(names):
        return False
    return all(kept_file.sha256(target / name, FILE_MAX_BYTES, root) == recorded[name] for name in names)


def made_once(target: Path, names: tuple[str, ...], build: Callable[[Path, Path], None],
              root: Path | None = None) -> Path:
    """`target` holding `names`: made by `build(folder, zig's local cache)` in a temporary folder beside
    it with a manifest of their sha256, then renamed in place (a process that loses the race uses the
    winner's). A `target` whose files do not match its manifest, or that is not to be trusted
    (_verified; `root`: the folder it is kept under, zig's cache), is set aside and made again."""
    import json

    if _verified(target, names, root):
        return target
    _private_parents(target, root)
    if os.path.lexists(target):
        warn_once(f"toolchain file {target}", "jitflow: %s does not match its recorded sha256; making it again",
                  target)
        _set_aside(target)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(work, work / ".zig-local")
        shutil.rmtree(work / ".zig-local", ignore_errors=True)
        (work / MANIFEST).write_text(json.dumps(_digests(work, names), sort_keys=True))
        try:
            os.rename(work, target)
        except OSError:
            if not _verified(target, names, root):
                raise                     # not a racing process that finished first: a real failure
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _private_parents(target: Path, root: Path | None) -> None:
    """Make the folders from `root` down to `target`'s parent, each private to this user; one that is
    a link, another user's or open to others is set aside and made anew (what is built goes nowhere
    that someone else could change)."""
    if root is None:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return
    at = Path(root)
    at.mkdir(mode=0o700, parents=True, exist_ok=True)    # zig's cache itself: checked where it is chosen
    for part in target.parent.relative_to(root).parts:
        at = at / part
        if not kept_file.private_folder(at):
            _set_aside(at)
            if not kept_file.private_folder(at):
                raise CacheError(f"cannot make the private folder {at} in zig's cache; "
                                 "set JITFLOW_ZIG_CACHE_DIR to a folder of your own")


def _set_aside(target: Path) -> None:
    """Move a damaged `target` out of the way in one rename (a racing reader never sees half of it)."""
    trash = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
    try:
        os.rename(target, trash / "old")
    except OSError:
        pass                              # another process set it aside first
    shutil.rmtree(trash, ignore_errors=True)


def _build_stubs(work: Path, local: Path, host: str, zig_cache: Path) -> None:
    (work / "empty.c").write_text("/* a stub library: only its soname matters */\n")
    jobs = [zig.Job(["-target", zig.ZIG_TARGETS[host], "-nostdlib", "-shared", f"-Wl,-soname,{name}",
                     "-Wl,--build-id=none", "empty.c", "-o", name], cwd=work, zig_cache=zig_cache, local_cache=local)
            for name in STUBS]
    for job in jobs:
        job.wait()
    (work / "empty.c").unlink()


def _build_archive(work: Path, local: Path, host: str, zig_cache: Path) -> None:
    (work / "builtins.c").write_text(builtins_c.SOURCE)
    zig.compile_object(work / "builtins.c", work / "builtins.o", [], host, zig_cache, local).wait()
    zig.run_tool(["ar", "rcs", ARCHIVE, "builtins.o"], cwd=work, zig_cache=zig_cache, local_cache=local)
    for leftover in ("builtins.c", "builtins.o"):
        (work / leftover).unlink()


@lru_cache(maxsize=1)
def compiler_rt_symbols() -> frozenset[str]:
    """The builtins zig's compiler runtime defines (read from its sources, shipped with zig)."""
    root = Path(zig.zig_binary()).parent / "lib"
    names: set[str] = set()
    for source in [root / "compiler_rt.zig", *sorted((root / "compiler_rt").glob("*.zig"))]:
        try:
            names.update(_SYMBOL_RE.findall(source.read_text(errors="replace")))
        except OSError:
            continue
    return frozenset(n for n in names if not _LIBC_NAMES.fullmatch(n))


def undefined_symbols(objects: Iterable[Path]) -> set[str]:
    """Symbols the relocatable objects use and none of them defines."""
    defined: set[str] = set()
    undefined: set[str] = set()
    for path in objects:
        found = elf.symbol_names(path.read_bytes())
        defined |= found[0]
        undefined |= found[1]
    return undefined - defined


def needed_builtins(objects: Iterable[Path]) -> tuple[set[str], set[str]]:
    """The compiler-rt builtins the objects use: (those the builtins archive provides, the others).

    zig's compiler-rt sources are read only when some `__` name is left that the archive does not
    provide: TVM's C seldom has one, and reading them costs tens of milliseconds.
    """
    undefined = undefined_symbols(objects)
    provided = undefined & builtins_c.PROVIDES
    others = {n for n in undefined - provided if n.startswith("__") and not _LIBC_NAMES.fullmatch(n)}
    return provided, (others & compiler_rt_symbols() if others else set())
