"""`jitflow cache check`: will every entry of a bundle, or of an unpacked cache, serve on this host?

Run where the entries will serve, before serving; no GPU is needed. For each entry it answers three
questions, each with the reasons it fails:

- inputs: does this environment compute the key inputs the entry was made under (rollout_inputs.py)?
  Where it does not, every lookup of the entry misses;
- host: can this host run its library (runtime/runs_here.py: host triple and glibc, the CPU level's
  features, for device code the GPU's arch and driver)?
- access (a cache only): can the user who will serve it (`--user`, default this one) reach, read and
  trust every folder and file a read-only lookup opens (files/user_access.py)?

A bundle is read as unpack reads it, with every check unpack makes (its signature too, where keys are
trusted), into a private temporary folder that is removed afterwards: nothing is installed. An
unpacked cache is read as pack reads it (door.outgoing: each library against its metadata).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ...errors import EntryRefusedError, InvalidInputError
from .bundle_format import KEY
from ..store.entry import LIBRARY, META, label, target_of, target_text

SCHEMA = "jitflow.cache-check/1"


@dataclass
class EntryCheck:
    """One entry's answers: each list holds why it fails that question (empty: it passes)."""

    key: str
    label: str
    target: str
    inputs: list[str] = field(default_factory=list)
    host: list[str] = field(default_factory=list)
    access: list[str] = field(default_factory=list)

    @property
    def serves(self) -> bool:
        return not (self.inputs or self.host or self.access)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "target": self.target, "serves": self.serves,
                "inputs": self.inputs, "host": self.host, "access": self.access}


@dataclass
class CheckReport:
    """What `cache check` found: the source checked, each entry, and what it assumed."""

    source: str
    entries: list[EntryCheck]
    gpu: str
    user: str | None
    inputs_note: str | None = None     # why key inputs were not compared (a TVM without its compiler)
    origin: str | None = None          # a bundle's: who packed it, verified or not
    problem: str | None = None         # why nothing could be checked (no entries, an unusable cache)
    access: str | None = None          # why the user cannot read the cache folder itself (every entry fails)

    @property
    def serves(self) -> bool:
        return self.problem is None and bool(self.entries) and all(e.serves for e in self.entries)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "source": self.source, "serves": self.serves, "gpu": self.gpu, "user": self.user,
                "inputs_note": self.inputs_note, "origin": self.origin, "problem": self.problem, "access": self.access,
                "entries": [e.to_json() for e in self.entries]}


class _Checker:
    """The answers for one entry at a time, with what every entry shares worked out once."""

    def __init__(self, arch: str | None, user: Any, where: str) -> None:
        from ...config import resolve
        from ...runtime.runs_here import assumed_gpu
        from .rollout_inputs import Environment, compiler_missing

        self.gpu = assumed_gpu(arch)
        self.user, self.where = user, where
        self.inputs_note = compiler_missing()
        self.environment = Environment(resolve())
        self.cache_problem: str | None = None

    def entry(self, key: str, folder: Path, meta: dict[str, Any], cache_top: Path | None = None) -> EntryCheck:
        from ...runtime.library_file import LibraryFile
        from ...runtime.runs_here import problems
        from .rollout_inputs import differences

        target = target_of(meta) or {}
        name = meta.get("name") if isinstance(meta.get("name"), str) else None
        functions = [str(f) for f in meta.get("functions") or []]
        found = EntryCheck(key, label(name, functions), target_text(target))
        recorded = meta.get("key_inputs")
        if self.inputs_note is None:
            found.inputs = differences(self.environment, recorded, self.where)
        options = (recorded or {}).get("options") if isinstance(recorded, dict) else None
        floor = options.get("cuda_floor") if isinstance(options, dict) else None
        try:
            with LibraryFile.open(folder / LIBRARY) as library:
                found.host = problems(library, target.get("host"), self.gpu, floor if isinstance(floor, str) else None)
        except OSError as exc:
            found.host = [f"its library cannot be opened: {exc.strerror or exc}"]
        if self.user is not None and cache_top is not None:
            found.access = self._access(folder, cache_top)
        return found

    def _access(self, folder: Path, top: Path) -> list[str]:
        from ...files.user_access import item_problem

        if self.cache_problem:
            return [self.cache_problem]
        shard, entries = folder.parent, folder.parent.parent
        for path, is_folder in ((entries, True), (shard, True), (folder, True), (folder / META, False),
                                (folder / LIBRARY, False)):
            problem = item_problem(self.user, path, is_folder, top)
            if problem:
                return [problem]
        return []


def check(bundle: str | os.PathLike | None = None, *, cache_dir: str | os.PathLike | None = None,
          arch: str | None = None, user: str | None = None,
          trust: Sequence[str | os.PathLike] | None = None) -> CheckReport:
    """Check the entries of `bundle` (read, never installed) or of the cache `cache_dir` (default:
    JITFLOW_CACHE_DIR, else the user cache folder) for serving here. arch: the GPU's arch to assume
    (default: the visible GPU's); user: who will serve the cache (default: this user; a cache only);
    trust: public keys the bundle must be signed by (default: JITFLOW_TRUSTED_KEYS).

    InvalidInputError (a BundleError for a bundle refused whole) for what cannot be checked as asked."""
    if bundle is not None and cache_dir is not None:
        raise InvalidInputError("give a bundle or --cache-dir, not both: a bundle is checked before it is unpacked, "
                                "a cache after")
    if bundle is not None and user is not None:
        raise InvalidInputError("--user checks who can read an unpacked cache: unpack the bundle, then check it with "
                                "--cache-dir DIR --user NAME")
    if bundle is not None:
        return _check_bundle(Path(bundle), arch, trust)
    return _check_cache(cache_dir, arch, user)


def _check_bundle(path: Path, arch: str | None, trust: Sequence[str | os.PathLike] | None) -> CheckReport:
    from ...config import trusted_keys
    from . import bundle_signature
    from .bundle_unpack import stage

    keys = bundle_signature.trusted_keys(trusted_keys(trust))
    checker = _Checker(arch, None, "in the bundle")
    staging = Path(tempfile.mkdtemp(prefix="jitflow-check-"))     # private (0700), outside any cache
    try:
        staged, origin = stage(path, staging, keys)
        found = [checker.entry(line.key, entry.folder, entry.meta) for line, entry in staged]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CheckReport(str(path), found, checker.gpu.describe(), None, checker.inputs_note, origin.text,
                       None if found else "the bundle holds no entries")


def _check_cache(cache_dir: str | os.PathLike | None, arch: str | None, user: str | None) -> CheckReport:
    from ...config import resolve
    from ...files import user_access
    from ..store.disk import Cache
    from ..door import outgoing

    folder = resolve(cache_dir=cache_dir).cache_dir
    who = user_access.named(user) if user is not None else user_access.current()
    checker = _Checker(arch, who, "in the cache")
    cache = Cache(folder, readonly=True)
    checker.cache_problem = user_access.cache_problem(who, cache.root, folder)
    report = CheckReport(str(folder), [], checker.gpu.describe(), who.describe(), checker.inputs_note,
                         access=checker.cache_problem)
    try:
        shards = sorted(p for p in cache.entries.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError as exc:
        report.problem = f"no cache to check at {folder}: {cache.entries} cannot be listed ({exc.strerror or exc})"
        return report
    for shard in shards:
        for entry in sorted(shard.iterdir()):
            if not (KEY.fullmatch(entry.name) and entry.name.startswith(shard.name)):
                continue
            try:
                meta = outgoing(entry, entry.name).meta
            except EntryRefusedError as exc:
                report.entries.append(EntryCheck(entry.name, "?", "?", host=[f"refused: {exc}"]))
                continue
            report.entries.append(checker.entry(entry.name, entry, meta, folder))
    if not report.entries:
        report.problem = f"the cache {folder} holds no entries"
    return report
