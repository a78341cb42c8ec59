"""Checks on a library file before the dynamic loader sees it.

dlopen maps a file's segments and trusts its headers: a flipped byte can crash the loader, a
truncated library dies with SIGBUS on first touch of a page past the end, a library for another CPU
fails with a misleading message, and any shared object "loads" as an empty TVM module. So first:

- a library jitflow linked ends with a digest record (formats/library_digest.py): its sha256 is
  checked (sizes first: the record must end where the ELF headers say the library ends), and a
  changed byte anywhere is refused;
- a library without a record (an older one, or TVM's own) has its ELF headers checked, and a file
  much longer than its headers describe is refused rather than read;
- then, for every library: the CPU it was built for, whether it is whole, whether it is a TVM library;
- what it records of the CPU features its code needs is handed to the loader, which checks them
  against this CPU (cpu_features.py) before dlopen, and so is the tvm-ffi it was built against
  (ffi_abi.py: another one than this process's is a warning, or a LoadError across minor versions).

Everything is read through formats/elf_file.py: positioned reads of what the headers point to, each
bounded, never a map of the whole file, so nothing here can crash or hang on any input.
"""
from __future__ import annotations

import os
import platform
import stat
from typing import Any, NamedTuple

from ..errors import InvalidInputError, LibraryFormatError
from ..formats import library_digest
from ..formats.elf_file import ElfFile
from ..formats.library_digest import DigestError

#: ELF e_machine -> the architecture name jitflow's host triples use
MACHINES = {62: "x86_64", 183: "aarch64", 3: "i386", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv64"}
_HERE = {"amd64": "x86_64", "arm64": "aarch64"}
_TVM_SYMBOL_PREFIX = b"__tvm_ffi_"
#: bytes a file may hold past what its ELF headers describe (linkers end the file with the headers)
SLACK = 4096
#: what an older library without a record is searched for (the record states it): a module of kind
#: "cuda" in the blob (its u64 length, then the name), and the names of TVM's contrib functions
_OLD_NEEDS = {"cuda": (4).to_bytes(8, "little") + b"cuda", "contrib": b"tvm.contrib."}
_CHUNK = 1 << 20


class Checked(NamedTuple):
    """What the checks found: what the library needs of the TVM runtime, and its digest's state."""

    needs: frozenset[str]
    digest: str          # "verified", "not checked" (verified elsewhere, or not asked), "none"
    cpu_level: str | None = None                 # the CPU level its record states (None: no record)
    cpu_needs: frozenset[str] = frozenset()      # the CPU features its code needs (/proc/cpuinfo names)
    device_code: Any = None      # the device code its record states (compat.DeviceCode.from_record reads it)
    strings: bytes = b""         # its dynamic string table (exported_functions reads it, when asked)
    tvm_ffi: str | None = None   # the tvm-ffi it was built against (None: its record states none)


def this_machine() -> str:
    machine = platform.machine().lower()
    return _HERE.get(machine, machine)


def check(fd: int, verify: bool = True) -> Checked:
    """Check the open file `fd` as a TVM library for this machine (its digest too, with `verify`);
    LibraryFormatError says why it cannot be loaded."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise LibraryFormatError("not a regular file")
    try:
        elf = ElfFile(fd, st.st_size)
        record = library_digest.read(elf.read, elf.size)
        state = _digest(fd, elf, record, verify)
        strings = _check_elf(elf)
    except OSError as exc:
        raise LibraryFormatError(f"cannot be read: {exc.strerror or exc}") from None
    if record is None:
        return Checked(_searched_needs(elf), state, strings=strings)
    return Checked(record.needs, state, record.cpu_level, record.cpu_needs, record.device_code, strings,
                   record.tvm_ffi)


def digest_text(fd: int) -> str:
    """What the digest of the library open at `fd` says, in words (for `jitflow inspect`);
    LibraryFormatError for a file that is not a library as a linker writes one."""
    elf = ElfFile(fd)
    try:
        record = library_digest.read(elf.read, elf.size)
        state = _digest(fd, elf, record, verify=True)
    except DigestError as exc:
        return f"digest: does not hold: {exc}"
    if record is None or state == "none":
        return "digest: none (built before libraries carried one, or by TVM: only its headers are checked)"
    return f"digest: holds (sha256 {record.digest.hex()[:16]}... of its {elf.size - library_digest.DIGEST_SIZE} bytes)"


def digest_note(path: str | os.PathLike) -> str:
    """digest_text of the library at `path`; InvalidInputError, naming it, for a file that is not one."""
    from .library_file import LibraryFile

    with LibraryFile.open(path) as library:
        try:
            return digest_text(library.fd)
        except LibraryFormatError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None


def recorded_cpu(path: str | os.PathLike) -> tuple[str | None, tuple[str, ...]]:
    """The CPU level and the features the library at `path` records, for `jitflow inspect`; (None, ())
    when it records none (or its record is damaged: digest_note says so)."""
    from .library_file import LibraryFile

    try:
        with LibraryFile.open(path) as library:
            elf = ElfFile(library.fd)
            record = library_digest.read(elf.read, elf.size)
            return (None, ()) if record is None else (record.cpu_level, tuple(sorted(record.cpu_needs)))
    except (OSError, LibraryFormatError):
        return None, ()


def _digest(fd: int, elf: ElfFile, record: library_digest.Record | None, verify: bool) -> str:
    """Check the sizes against the record (or its absence) and, with `verify`, the sha256."""
    if record is None:
        extent = elf.extent()
        if elf.size > extent + SLACK:
            raise LibraryFormatError(f"the file has {elf.size} bytes and its ELF headers describe {extent}: it is "
                                     "not a library as a linker writes one; build or copy it again")
        if elf.has_section(library_digest.SECTION):
            raise DigestError("its digest record is missing (the library says it ends with one): it was "
                              "truncated or damaged; build or copy it again")
        return "none"
    try:
        extent = elf.extent()
    except LibraryFormatError:
        extent = -1
    if not extent <= record.covered <= extent + SLACK:
        raise DigestError("it changed since it was built: its ELF headers no longer match its digest record; "
                          "build or copy it again")
    if not verify:
        return "not checked"
    if not library_digest.matches(fd, record):
        raise DigestError("it changed since it was built: its bytes do not match the sha256 it carries; "
                          "build or copy it again")
    return "verified"


def exported_functions(strings: bytes) -> tuple[str, ...]:
    """The functions a library exports, sorted, from its dynamic string table (Checked.strings):
    `__tvm_ffi_<name>` (TVM's own symbols, `__tvm_ffi__library_bin` and the like, have two
    underscores after the prefix)."""
    cut = len(_TVM_SYMBOL_PREFIX)
    return tuple(sorted({s[cut:].decode("utf-8", "replace") for s in strings.split(b"\0")
                         if s.startswith(_TVM_SYMBOL_PREFIX) and len(s) > cut and s[cut:cut + 1] != b"_"}))


def _check_elf(elf: ElfFile) -> bytes:
    """Check the ELF file for this machine and as a TVM library; its dynamic string table."""
    machine = MACHINES.get(elf.machine, f"ELF machine {elf.machine}")
    if machine != this_machine():
        raise LibraryFormatError(f"built for {machine}-linux-gnu, and this machine is {this_machine()}: load it on "
                                 "a machine of that architecture (jitflow inspect shows what a library needs)")
    if elf.type != 3:
        raise LibraryFormatError(f"not a shared library (ELF type {elf.type})")
    elf.extent()                # every segment and section inside the file, or Truncated
    strings = elf.dynamic_strings()
    if strings is None or _TVM_SYMBOL_PREFIX not in strings:
        raise LibraryFormatError("not a TVM library: it exports no __tvm_ffi_ symbols (build it with jitflow or "
                                 "tvm's export_library)")
    return strings


def _searched_needs(elf: ElfFile) -> frozenset[str]:
    """What a library without a record needs, by one pass over the bytes its headers describe."""
    found: set[str] = set()
    end = elf.extent()
    overlap = max(len(m) for m in _OLD_NEEDS.values()) - 1
    at, tail = 0, b""
    while at < end and len(found) < len(_OLD_NEEDS):
        chunk = elf.read(at, min(_CHUNK, end - at), cap=_CHUNK)
        window = tail + chunk
        found |= {need for need, marker in _OLD_NEEDS.items() if marker in window}
        tail, at = window[-overlap:], at + len(chunk)
    return frozenset(found)
