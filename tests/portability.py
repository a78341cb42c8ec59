"""What every library jitflow builds must be, whatever its CPU: checked from its ELF headers."""
from __future__ import annotations

from jitflow.formats.elf import ElfInfo

PORTABLE_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0"}


def check_portable(info: ElfInfo, machine: str) -> None:
    """The library is for `machine`, 64-bit, links only libc/libm/libdl/libpthread, needs glibc <= 2.17."""
    assert (info.machine, info.elf_class) == (machine, 64)
    assert set(info.needed) <= PORTABLE_NEEDED, info.needed
    if info.glibc_baseline is not None:
        assert tuple(int(x) for x in info.glibc_baseline.split(".")) <= (2, 17), info.glibc_baseline
    assert not any("ubsan" in s for s in info.exported)
    assert "__tvm_ffi_main" in info.exported
