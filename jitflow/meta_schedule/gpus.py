"""The GPUs jitflow.meta_schedule.Runner measures on: those CUDA makes visible to this process, read
through the driver (no context is made on any of them), and the ones of one model among them.

Each measuring process is started with CUDA_VISIBLE_DEVICES set to its GPU's UUID, so that it sees
that GPU alone (as its device 0), whatever order or subset this process sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import InvalidInputError


@dataclass(frozen=True)
class Gpu:
    """One visible GPU: its number as CUDA gives it in this process, its model and arch, and its UUID."""

    index: int
    name: str
    arch: str
    uuid: str

    def __str__(self) -> str:
        return f"cuda:{self.index} ({self.name})"


def visible() -> list[Gpu]:
    """Every GPU the CUDA driver shows this process, in its order; none where there is no driver."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return []
    ok = driver.CUresult.CUDA_SUCCESS
    try:
        (err,) = driver.cuInit(0)
        if err != ok:
            return []
        err, count = driver.cuDeviceGetCount()
        if err != ok:
            return []
        found = []
        attr = driver.CUdevice_attribute
        for index in range(count):
            err, dev = driver.cuDeviceGet(index)
            err_name, name = driver.cuDeviceGetName(256, dev)
            err_uuid, uuid = driver.cuDeviceGetUuid(dev)
            err_major, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            err_minor, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            if ok != err or any(e != ok for e in (err_name, err_uuid, err_major, err_minor)):
                continue
            found.append(Gpu(index, name.split(b"\0", 1)[0].decode(errors="replace").strip(), f"sm_{major}{minor}",
                             _uuid_text(bytes(uuid.bytes))))
        return found
    except Exception:  # noqa: BLE001 - a broken driver install means no GPU to measure on, not a crash
        return []


def _uuid_text(raw: bytes) -> str:
    """CUDA_VISIBLE_DEVICES' spelling of a device UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def chosen(gpus: list[Gpu], devices: Sequence[int] | None) -> list[Gpu]:
    """The GPUs `devices` names (CUDA's numbers in this process), or all of `gpus` for None;
    InvalidInputError for a number that is not a visible GPU or is named twice."""
    if devices is None:
        return list(gpus)
    if isinstance(devices, (str, bytes, int)) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                         for d in devices):
        raise InvalidInputError(f"devices must be a list of CUDA device numbers (such as [0, 1]), not {devices!r}")
    if not devices:
        raise InvalidInputError("devices=[] names no GPU: name one or more, or leave devices out for every visible GPU")
    by_index = {g.index: g for g in gpus}
    missing = [d for d in devices if d not in by_index]
    if missing:
        seen = ", ".join(str(g) for g in gpus) or "none"
        raise InvalidInputError(f"devices={list(devices)}: no visible GPU numbered {missing[0]} (visible: {seen})")
    if len(set(devices)) != len(devices):
        raise InvalidInputError(f"devices={list(devices)} names a GPU twice")
    return [by_index[d] for d in devices]


def one_model(gpus: list[Gpu]) -> tuple[list[Gpu], list[Gpu]]:
    """The GPUs of the first one's model (and arch), and the others: a task's candidates are measured on
    GPUs of one model, so that their times compare."""
    if not gpus:
        return [], []
    first = gpus[0]
    same = [g for g in gpus if (g.name, g.arch) == (first.name, first.arch)]
    return same, [g for g in gpus if g not in same]
