"""Facts about a built shared library read from its ELF headers: CPU, glibc baseline, dependencies."""
from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import LibraryFormatError

_MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


@dataclass
class ElfInfo:
    machine: str                      # "x86_64", "aarch64", ...
    elf_class: int                    # 32 or 64
    glibc_baseline: str | None        # highest GLIBC_x.y symbol version required, e.g. "2.17"
    needed: list[str] = field(default_factory=list)
    exported: list[str] = field(default_factory=list)


def read(path: str | os.PathLike) -> ElfInfo:
    """Read an ELF shared library's machine, class, needed libraries, glibc versions and exports.

    Any malformed input is a LibraryFormatError: a section whose name says one kind and whose type
    another is not read as the name says (pyelftools then hands back a plain section), and whatever
    pyelftools raises on bytes it cannot follow (its own errors, a seek past 2**63, a string that is
    not text, a table that ends early) says that the library is not readable.
    """
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection
    from elftools.elf.sections import SymbolTableSection

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)   # a FIFO is refused, not waited on
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise LibraryFormatError(f"{path} is not a regular file")
            elf = ELFFile(f)
            machine = _MACHINES.get(elf.header["e_machine"], str(elf.header["e_machine"]))
            needed, versions, exported = [], [], []
            dynamic = _section(elf, ".dynamic", DynamicSection)
            if dynamic is not None:
                needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
            verneed = _section(elf, ".gnu.version_r", GNUVerNeedSection)
            if verneed is not None:
                for _, aux in verneed.iter_versions():
                    for a in aux:
                        if a.name.startswith("GLIBC_") and a.name[6:].replace(".", "").isdigit():
                            versions.append(tuple(int(x) for x in a.name[6:].split(".") if x))
            dynsym = _section(elf, ".dynsym", SymbolTableSection)
            if dynsym is not None:
                exported = sorted(s.name for s in dynsym.iter_symbols()
                                  if s.name and s["st_shndx"] != "SHN_UNDEF")
            baseline = ".".join(map(str, max(versions))) if versions else None
            return ElfInfo(machine, elf.elfclass, baseline, needed, exported)
    except LibraryFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyelftools' errors on malformed input are of many types
        raise LibraryFormatError(f"{path} is not a readable ELF library: {failure_reason(exc)}") from None


def _section(elf: Any, name: str, kind: type) -> Any:
    """The section `name` as pyelftools reads a section of its type, None without one; a
    LibraryFormatError when a section of that name is of another type (its header was changed)."""
    section = elf.get_section_by_name(name)
    if section is not None and not isinstance(section, kind):
        raise LibraryFormatError(f"its {name} section is of type {section['sh_type']}, not what the name says")
    return section


def failure_reason(exc: Exception) -> str:
    """What went wrong reading malformed bytes, in a line (pyelftools' own errors, or Python's)."""
    text = str(exc).splitlines()[0][:160] if str(exc) else ""
    return text if type(exc).__name__.startswith("ELF") else f"{type(exc).__name__}: {text}".rstrip(": ")


_SHT_SYMTAB, _SHT_DYNSYM, _SHN_UNDEF = 2, 11, 0


def _sections(data: bytes | memoryview) -> list[tuple[int, ...]]:
    """The section headers of a 64-bit little-endian ELF image, as tuples (struct.error, IndexError
    on a malformed one: the callers turn those into LibraryFormatError)."""
    if bytes(data[:6]) != b"\x7fELF\x02\x01":
        raise LibraryFormatError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    return [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]


def symbol_names(data: bytes) -> tuple[set[str], set[str]]:
    """(defined, undefined) names in a 64-bit little-endian ELF file's .symtab, read directly (a
    linker's question about an object, answered without a general ELF library's import time)."""
    found: tuple[set[str], set[str]] = (set(), set())
    try:
        sections = _sections(data)
        for _name, sh_type, _fl, _addr, offset, size, link, _info, _align, entsize in sections:
            if sh_type != _SHT_SYMTAB or not entsize:
                continue
            strings = sections[link][4]
            for i in range(1, size // entsize):
                st_name, _info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, offset + i * entsize)
                if st_name:
                    start = strings + st_name
                    name = data[start:data.index(b"\0", start)].decode("utf-8", "replace")
                    found[shndx == _SHN_UNDEF].add(name)
        return found
    except (struct.error, IndexError, ValueError) as exc:
        raise LibraryFormatError(f"the ELF tables are malformed: {exc}") from None
