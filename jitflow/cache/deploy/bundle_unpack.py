"""`unpack`: a bundle (bundle_format.py) into a cache, all or nothing.

The tar is read once, as a stream (a pipe too), into a private staging folder inside the cache, its
headers bounded before they are read (bundle_tar.py): the manifest first (bounded), then its
signature where it has one (bundle_signature.py: with trusted keys, a bundle whose signature does not
hold is refused here, before its manifest is even parsed), then each member, which must be a regular
file the manifest lists, at most once,
of the size it declares, written without following links and hashed as it is written. Any other
member (a link, a device, a FIFO, a folder, a path of its own such as `../x` or `/etc/x`), a file
the manifest lists that never comes, a digest that does not match or a tar that ends early refuses
the whole bundle. Then every entry passes the checks the cache makes of an entry (door.check_folder)
before the first is installed; and each is installed through the cache's door (door.admit: under
its key's lock, by one rename), unless it is there already. The staging folder is removed whatever
happens (held while in use, staging.py: should the process be killed, by the next unpack, prune or
clear). Only the cache folder is written to.
"""
from __future__ import annotations

import hashlib
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ...errors import BundleError, CacheError, EntryRefusedError, UntrustedBundleError
from . import bundle_format, bundle_signature
from .bundle_format import MANIFEST, EntryLine
from .bundle_signature import SIGNATURE, Origin, TrustedKey
from .bundle_tar import BundleTar, Unreadable
from ..store.disk import Cache
from ..store.staging import hold, remove_abandoned

if TYPE_CHECKING:
    from ..door import Checked

#: the mode of the folders unpack makes above the cache's own, and of the cache folder: mkdir's
#: (the umask applies), never writable by others
_MKDIR_P = 0o755
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.FIFOTYPE: "a FIFO",
          tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device", tarfile.DIRTYPE: "a folder"}


@dataclass
class UnpackResult:
    """What unpack() did: the entries installed, those skipped because the cache had them already,
    the bytes installed, and who packed the bundle (whether its signature was verified)."""

    location: Path
    installed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes: int = 0
    origin: Origin | None = None

    def to_json(self) -> dict[str, Any]:
        return {"location": str(self.location), "installed": self.installed, "skipped": self.skipped,
                "entries": len(self.installed), "bytes": self.bytes,
                "origin": self.origin.to_json() if self.origin else None}


_FIX = "Pack it again from a sound cache (`jitflow cache pack`), and check how it was copied"


def _refuse(path: Path, why: str, fix: str = _FIX) -> BundleError:
    return BundleError(f"refusing the bundle {path}: {why}; nothing was installed. {fix}".rstrip())


def _what(member: tarfile.TarInfo) -> str:
    name = member.name
    parts = name.split("/")
    if name.startswith("/") or ".." in parts:
        return f"the member {name!r} has a path that leaves the cache folder"
    if not member.isreg():
        return f"the member {name!r} is {_KINDS.get(member.type, 'not a regular file')}"
    return f"the member {name!r} is not one the manifest lists"


def _copy(read: Callable[[int], bytes], size: int, dest: str) -> str:
    """Write `size` bytes `read` gives to the new file `dest`; their sha256 (short: a shorter file)."""
    h = hashlib.sha256()
    fd = os.open(dest, _WRITE_FLAGS, 0o600)
    try:
        left = size
        while left:
            chunk = read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
            left -= len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest() if left == 0 else "short"


def _stage(path: Path, stream: IO[bytes], staging: Path,
           trusted: list[TrustedKey]) -> tuple[list[EntryLine], Origin]:
    """Read the bundle from `stream` into `staging`/<key>/..., checked against its manifest and, with
    `trusted` keys, its signature; its entries and who packed it (bundle_tar.Unreadable where the tar
    cannot be read)."""
    tar = BundleTar(stream)          # uncompressed only; read front to back, a pipe too
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isreg():
        raise _refuse(path, f"its first member is not {MANIFEST}")
    if first.size > bundle_format.MANIFEST_MAX_BYTES:
        raise _refuse(path, f"its manifest is larger than {bundle_format.MANIFEST_MAX_BYTES} bytes")
    data = tar.read(first, first.size)
    if len(data) != first.size:
        raise _refuse(path, "it ends inside its manifest (truncated)")
    member, signature = tar.next(), None
    if member is not None and member.name == SIGNATURE and member.isreg():
        if member.size > bundle_signature.MAX_BYTES:
            raise _refuse(path, f"its {SIGNATURE} is larger than {bundle_signature.MAX_BYTES} bytes")
        signature = tar.read(member, member.size)
        member = tar.next()
    try:
        origin = bundle_signature.origin(data, signature, trusted)   # before the manifest is parsed
    except UntrustedBundleError as exc:
        raise UntrustedBundleError(f"refusing the bundle {path}: {exc}") from None
    except BundleError as exc:
        raise _refuse(path, str(exc)) from None
    try:
        _version, entries = bundle_format.parse_manifest(data)
    except BundleError as exc:
        raise _refuse(path, str(exc), "" if "version" in str(exc) else _FIX) from None
    expected = {bundle_format.member_name(e.key, f.path): (e.key, f) for e in entries for f in e.files}
    root = str(staging)
    for e in entries:
        os.mkdir(os.path.join(root, e.key), 0o700)
    seen: set[str] = set()
    for member in _rest(tar, member):
        name = member.name
        if name in seen:
            raise _refuse(path, f"the member {name!r} comes twice")
        if name not in expected or not member.isreg():
            raise _refuse(path, _what(member))
        key, line = expected[name]
        if member.size != line.size:
            raise _refuse(path, f"the member {name!r} is {member.size} bytes, and the manifest says {line.size}")
        seen.add(name)
        dest = os.path.join(root, key, line.path)     # strings: pathlib costs more than the copy here
        if "/" in line.path and not os.path.isdir(os.path.dirname(dest)):
            os.mkdir(os.path.dirname(dest), 0o700)
        digest = _copy(lambda n: tar.read(member, n), line.size, dest)
        if digest == "short":
            raise _refuse(path, f"it ends inside the member {name!r} (truncated)")
        if digest != line.sha256:
            raise _refuse(path, f"the member {name!r} does not match its sha256 in the manifest (damaged)")
    missing = sorted(set(expected) - seen)
    if missing:
        raise _refuse(path, f"the member {missing[0]!r} the manifest lists is missing"
                            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return entries, origin


def _rest(tar: BundleTar, member: tarfile.TarInfo | None) -> Iterator[tarfile.TarInfo]:
    """`member` (read already), then every member after it."""
    while member is not None:
        yield member
        member = tar.next()


def stage(path: str | os.PathLike, staging: Path,
          trusted: list[TrustedKey]) -> tuple[list[tuple[EntryLine, Checked]], Origin]:
    """The bundle `path` read into the private folder `staging` with every check unpack makes before it
    installs anything: each file against the manifest, the manifest against its signature (with `trusted`
    keys), each entry as the cache checks one (door.check_folder). BundleError (refused whole) when one fails."""
    from ..door import check_folder

    source = Path(path)
    try:
        stream = open(source, "rb")
    except OSError as exc:
        raise BundleError(f"cannot read the bundle {source}: {exc.strerror}") from None
    with stream:
        try:
            entries, origin = _stage(source, stream, staging, trusted)
        except Unreadable as exc:
            raise _refuse(source, str(exc)) from None
    try:
        return [(e, check_folder(staging / e.key, e.key)) for e in entries], origin
    except EntryRefusedError as exc:
        raise _refuse(source, str(exc)) from None


def unpack(path: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
           readable: bool = False, trust: Sequence[str | os.PathLike] | None = None) -> UnpackResult:
    """Install the entries of the bundle `path` into the cache (default: JITFLOW_CACHE_DIR, else the
    user cache folder), each checked against the manifest's digests and the cache's own checks before
    any is installed; entries the cache has already are skipped. Returns an UnpackResult.

    Missing folders above the cache, and the cache folder itself, are made as `mkdir -p` makes them;
    the folders inside it (v1/ and below) are private to this user, or with `readable` readable (never
    writable) by every user, every entry already there included: root unpacks, an app user serves.
    No mode that is there is narrowed.

    trust: public key files (default: JITFLOW_TRUSTED_KEYS): the bundle must be signed by one of them
    (`pack --sign`), else it is refused with an UntrustedBundleError. Without any, the bundle is not
    verified for its origin (UnpackResult.origin says so). A bundle that fails any check is refused
    whole with a BundleError, and nothing is installed.
    """
    from ...config import resolve, trusted_keys
    from ..store.location import open_cache

    keys = bundle_signature.trusted_keys(trusted_keys(trust))     # a bad key file: before anything else
    settings = resolve(cache_dir=cache_dir)
    cache = open_cache(settings).for_admin(writes="cache unpack")
    cache.ensure(readable=readable, parents=_MKDIR_P)
    result = UnpackResult(cache.folder)
    remove_abandoned(cache.staging_root)      # what an unpack or a build killed midway left
    held = hold(cache.staging_root, "unpack")
    staging = held.folder
    try:
        checked, result.origin = stage(path, staging, keys)
        from ..door import admit

        empty = not any(cache.entries.iterdir())
        for line, entry in checked:
            admitted = admit(cache, line.key, entry, readable=readable)
            admitted.close()
            if admitted.installed:
                result.installed.append(line.key)
                result.bytes += line.size
            else:
                result.skipped.append(line.key)
        _keep_cap(cache, result.bytes, settings.cache_max_size, empty)
    except OSError as exc:
        raise CacheError(f"cannot unpack the bundle into {cache.root}: {exc.strerror or exc} (entries installed "
                         f"before this: {len(result.installed)}); free space, or give another --cache-dir") from None
    finally:
        held.release()
    return result


def _keep_cap(cache: Cache, installed: int, max_size: int, was_empty: bool) -> None:
    """The size cap, once for every entry installed (admin.after_publish does it for one): the
    entries' recorded size grows by what the manifest says was installed (each entry's metadata, as
    published, a few bytes more), and the cache is pruned when that passes the cap or is unknown (a
    cache that was empty before is what was installed, without a walk)."""
    if not installed:
        return
    from ..store import admin, counters

    size = counters.grow(cache.root, installed)
    if size is None and was_empty:
        counters.set_size(cache.root, installed)
        size = installed
    if size is None or size > max_size:
        admin.prune(cache, max_size=max_size)
