"""An unpacked cache's entries loaded by label or key prefix, without computing a key: the serving image
with no compiler at all (a TVM installed without it, TVM_USE_RUNTIME_LIB=1), where no IRModule can be
built and so no key taken.

    lib = jitflow.load_entry("vecadd")                     # a kernel library, as jitflow.load gives it
    vm = jitflow.load_vm_entry("mlp", "cuda")              # a model's VirtualMachine, as jitflow.load_vm

`name` is an entry's label (the name it was built under, `compile(name=...)` or `FILE.py:NAME`, else
its functions, as the bundle's manifest and `jitflow cache ls` show it) or 6 or more hexadecimal
digits of its key. Entries built for another host are never candidates; `target` ("c", "cuda")
chooses among entries of one label built for several. A name that fits no entry is an
EntryNotFoundError listing the entries there are, one that fits several an InvalidInputError listing
them.

The label only chooses a key. The entry is then found as a read-only lookup finds one (disk.py):
nothing is written, folders and files must be this user's or root's and writable by nobody else,
and the library's sha256 is checked through the descriptor it is loaded from, so the bytes verified
are the bytes loaded. Matching reads each entry's meta.json (bounded, without following links): a few
milliseconds for a hundred entries.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import CacheMissError, EntryNotFoundError, InvalidInputError, UntrustedFolderError
from ..files import folder_trust
from .store.disk import FIX, Cache
from .store.entry import META, label, read_meta_file, target_of, target_text

#: a key prefix: as `jitflow inspect` takes one, at least 6 hexadecimal digits
_MIN_PREFIX = 6
_HEX = frozenset("0123456789abcdef")
_SHOWN = 12


class Candidate(NamedTuple):
    """An entry a name may stand for: its key, label, target in words, host and kind."""

    key: str
    label: str
    target: str
    host: str | None
    kind: str | None

    def line(self) -> str:
        return f"{self.key[:_SHOWN]} {self.label} ({self.target})"


def _meta(folder: Path) -> dict[str, Any] | None:
    try:
        fd = os.open(folder / META, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return read_meta_file(f)[0]


def _candidates(cache: Cache) -> list[tuple[Candidate, set[str]]]:
    """Every entry of the cache with the labels it answers to."""
    found = []
    for folder in sorted(cache.entries.glob("*/*")):
        key = folder.name
        if len(key) != 64 or not set(key) <= _HEX or not key.startswith(folder.parent.name):
            continue
        meta = _meta(folder) or {}
        name = meta.get("name") if isinstance(meta.get("name"), str) else None
        functions = [str(f) for f in meta.get("functions") or [] if isinstance(f, str)]
        target = target_of(meta) or {}
        shown = label(name, functions)
        names = {name} if name else {shown, ",".join(functions)}
        found.append((Candidate(key, shown or "?", target_text(target), target.get("host"), target.get("kind")),
                      names))
    return found


def _listing(candidates: list[Candidate], limit: int = 12) -> str:
    lines = [c.line() for c in candidates[:limit]]
    if len(candidates) > limit:
        lines.append(f"and {len(candidates) - limit} more")
    return "; ".join(lines) or "none"


def find(name: str, cache_dir: str | os.PathLike | None = None, target: str | None = None) -> tuple[Cache, Candidate]:
    """The read-only cache (cache_dir, else JITFLOW_CACHE_DIR, else the user cache folder) and its one
    entry that `name` (a label or a key prefix) stands for, of this host and of kind `target` if given."""
    from ..config import resolve
    from ..targets.hosts import machine_host

    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"name must be an entry's label or 6 or more digits of its key, not {name!r}")
    if target is not None and target not in ("c", "cuda"):
        raise InvalidInputError(f"target must be 'c', 'cuda' or None (any), not {target!r}")
    cache = Cache(resolve(cache_dir=cache_dir).cache_dir, readonly=True)
    problem = folder_trust.folder_problem(cache.root, installed=True)
    if problem is not None:
        if not os.path.lexists(cache.root):
            raise EntryNotFoundError(f"no cache at {cache.folder} ({problem}): unpack a bundle there (jitflow cache "
                                     "unpack BUNDLE --cache-dir DIR), or give cache_dir= (JITFLOW_CACHE_DIR)")
        raise UntrustedFolderError(cache.root, problem, FIX)
    text = name.strip()
    prefix = text.lower() if len(text) >= _MIN_PREFIX and set(text.lower()) <= _HEX else None
    everything = _candidates(cache)
    here = [(c, names) for c, names in everything if c.host == machine_host() and (target is None or c.kind == target)]
    chosen = {c.key: c for c, names in here if text in names or (prefix and c.key.startswith(prefix))}
    if len(chosen) == 1:
        return cache, next(iter(chosen.values()))
    if chosen:
        raise InvalidInputError(f"{text!r} stands for {len(chosen)} entries of the cache {cache.folder}: "
                                f"{_listing(list(chosen.values()))}; give more digits of the key"
                                + ("" if target else ", or target='c' or 'cuda'"))
    elsewhere = [c for c, names in everything if c not in {h for h, _ in here}
                 and (text in names or (prefix and c.key.startswith(prefix)))]
    why = f" (there is {_listing(elsewhere)}, built for another host or target)" if elsewhere else ""
    raise EntryNotFoundError(f"no entry of the cache {cache.folder} is labelled {text!r} or has a key starting with "
                             f"it{why}; its entries: {_listing([c for c, _ in everything])}. Fix: give a label "
                             "`jitflow cache ls` shows (the name given to compile(name=...)), or pack and unpack the "
                             "entry")


def _open(name: str, cache_dir: str | os.PathLike | None, target: str | None) -> tuple[Cache, Candidate, Any, Any]:
    """The entry `name` stands for, looked up as a read-only cache looks one up: (cache, candidate, the
    library held open, its metadata); a CacheMissError saying why when it cannot be used."""
    cache, found = find(name, cache_dir, target)
    got = cache.lookup(found.key)
    if got is None:
        raise CacheMissError(found.key, found.label, found.target, cache.folder,
                             cache.refusal or "the entry went while it was looked up")
    return cache, found, got[0], got[1]


def load_entry(name: str, *, cache_dir: str | os.PathLike | None = None, target: str | None = None,
               device_query: Any = None) -> Any:
    """The library of the cache entry `name` (a label or 6+ digits of its key) stands for, loaded as
    jitflow.load loads an exported library: no key is computed, no `tvm` is imported, nothing is written.

    cache_dir: the cache (default JITFLOW_CACHE_DIR, else the user cache folder); target: "c" or
    "cuda" where a label names entries of both; device_query: how the GPU and driver are found
    (runtime.compat). See the module's docstring for how `name` is matched."""
    from ..runtime.load import load_library

    _, _, library, meta = _open(name, cache_dir, target)
    with library:
        return load_library(library, cuda=bool(meta.get("cuda")), device_query=device_query)


def load_vm_entry(name: str, device: Any = None, *, memory_cfg: str | dict[Any, str] | None = None,
                  cache_dir: str | os.PathLike | None = None, target: str | None = None,
                  device_query: Any = None) -> Any:
    """A VirtualMachine over the model entry `name` stands for, as jitflow.load_vm gives one for an
    exported library (device: "cpu", "cuda", "cuda:1", a Device or torch.device; default the first GPU
    for a CUDA model, else the CPU; memory_cfg: "pooled" or "naive"). The rest as load_entry."""
    from ..runtime.load import load_library
    from ..runtime.vm import check_memory_cfg, gpu_index, virtual_machine

    check_memory_cfg(memory_cfg)
    _, _, library, meta = _open(name, cache_dir, target)
    cuda = bool(meta.get("cuda"))
    with library:
        module = load_library(library, cuda=cuda, device_query=device_query,
                              device_index=gpu_index(device) if cuda else 0)
    functions = [str(f) for f in meta.get("functions") or []]
    return virtual_machine(module, device, cuda, memory_cfg, functions=lambda: functions)
