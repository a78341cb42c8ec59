"""The shared tier in a build: after a local miss, load a verified shared entry, or wait while
another node builds the key, or take the cluster build lock and share what was built.

Anyone who can write to the tier can set a lock, with or without an expiry. So a node waits on a
held lock only while a signed heartbeat says a builder is alive: the lock's holder writes one
(HMAC with the shared key over the key and the time) when it takes the lock and at each renewal.
A node waits at most the lock's TTL past the moment it first found the lock held, or past the
time in the newest valid heartbeat it has read, whichever is later (LockWatch): a heartbeat
replayed after its builder died carries its old time and extends nothing. Without a key nothing
can be proven (anyone can write a heartbeat), so a node never waits longer than the TTL.

Every request goes through `Tier.call`, which turns any failure into local-only behaviour: one
warning per process, then the tier is left alone for RETRY_AFTER seconds. Nothing here raises.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import socket
import threading
import time
import uuid
from typing import Any

from ...config import RemoteSettings, Settings
from ...errors import EntryRefusedError, RemoteEntryError
from ...logs import warn_once
from ...runtime.library_file import LibraryFile
from .. import door
from ..store.disk import Cache
from ..store.entry import FORMAT_VERSION
from .backend import RemoteBackend, open_backend
from .stats import count, persist_at_exit

log = logging.getLogger("jitflow")

RETRY_AFTER = 60.0       # seconds the tier is skipped after a failed request
POLL = 0.2               # seconds between looks while another node builds
WAIT_LIMIT = 15 * 60.0   # longest wait for another node's build before building here
NOSTORE_TTL = 3600.0     # an entry too large to share: others build without waiting for an hour
FAILED_TTL = 60.0        # a build that failed: others build (and see the error) without waiting

_FAILED = object()
_tiers: dict[RemoteSettings, Tier] = {}   # one per configuration in this process: it remembers a failed tier
_tiers_lock = threading.Lock()


def _warn_once(message: str, *args: Any) -> None:
    """The process's one warning about the shared tier; later ones are logged at info level."""
    warn_once("shared tier", message, *args)


def _names(key: str) -> tuple[str, str, str, str]:
    base = f"v{FORMAT_VERSION}"
    return f"{base}:entry:{key}", f"{base}:lock:{key}", f"{base}:nostore:{key}", f"{base}:alive:{key}"


def _heartbeat_mac(secret: str | None, key: str, stamp: bytes) -> bytes:
    return hmac.new((secret or "").encode(), b"jitflow alive\n" + key.encode() + b"\n" + stamp,
                    hashlib.sha256).hexdigest().encode()


def heartbeat(secret: str | None, key: str, now: float | None = None) -> bytes:
    """The signed statement 'a builder of `key` was alive at `now`' that waiting nodes check."""
    stamp = f"{time.time() if now is None else now:.3f}".encode()
    return stamp + b" " + _heartbeat_mac(secret, key, stamp)


def heartbeat_time(value: bytes | None, secret: str, key: str) -> float | None:
    """The time a validly signed heartbeat for `key` says its builder was alive, or None."""
    if not isinstance(value, bytes) or b" " not in value or len(value) > 200:
        return None
    stamp, mac = value.split(b" ", 1)
    try:
        when = float(stamp)
    except ValueError:
        return None
    if not (math.isfinite(when) and hmac.compare_digest(mac, _heartbeat_mac(secret, key, stamp))):
        return None
    return when


class LockWatch:
    """Whether a node should go on waiting on a cluster lock that another holds.

    It waits until `ttl` seconds after it first saw the lock held, or after the newest time a
    heartbeat signed with the key vouches for, whichever is later. A replayed heartbeat vouches for
    its old time only; one dated more than `ttl` ahead is refused (no clock is that far off).
    Without a key no heartbeat counts: the wait is the TTL at most.
    """

    def __init__(self, secret: str | None, key: str, ttl: float, now: float) -> None:
        self.secret, self.key, self.ttl = secret, key, ttl
        self.until = now + ttl

    def still_waiting(self, beat: bytes | None, now: float) -> bool:
        when = heartbeat_time(beat, self.secret, self.key) if self.secret else None
        if when is not None and when <= now + self.ttl:
            self.until = max(self.until, when + self.ttl)
        return now <= self.until


class Tier:
    """One configured shared tier in this process: its backend and whether it is usable now."""

    def __init__(self, settings: RemoteSettings) -> None:
        self.settings = settings
        self.secret = settings.secret
        self.usable = bool(settings.secret or settings.unsigned) and not settings.url_problem
        self.off_until = 0.0
        self._backend: RemoteBackend | None = None
        if settings.url_problem:
            _warn_once("jitflow: %s; the shared cache tier is off, builds use the local cache only",
                       settings.url_problem)
        elif not self.usable:
            _warn_once("jitflow: JITFLOW_REMOTE_CACHE is set but JITFLOW_REMOTE_CACHE_KEY is not: the shared tier "
                       "is off (set the same key on every node, or JITFLOW_REMOTE_CACHE_UNSIGNED=1 to accept "
                       "unsigned entries at your own risk)")

    def available(self) -> bool:
        return self.usable and time.monotonic() >= self.off_until

    def call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """backend.op(*args), or _FAILED if the tier is off or the request failed."""
        if not self.available():
            return _FAILED
        try:
            if self._backend is None:
                self._backend = open_backend(self.settings.url or "", self.settings.timeout, self.settings.max_bytes)
            return getattr(self._backend, op)(*args, **kwargs)
        except Exception as exc:
            count("errors")
            self.off_until = time.monotonic() + RETRY_AFTER
            _warn_once("jitflow: shared cache tier unavailable, going on with the local cache only: %s", exc)
            return _FAILED


def forget_tiers() -> None:
    """Forget every tier this process used (and that it found one down): the next build asks afresh."""
    with _tiers_lock:
        _tiers.clear()


def tier_for(settings: RemoteSettings) -> Tier | None:
    """The process's Tier for these settings (None when no shared tier is configured)."""
    if not settings.url:
        return None
    with _tiers_lock:
        if settings not in _tiers:
            _tiers[settings] = Tier(settings)
        return _tiers[settings]


class _Renewer(threading.Thread):
    """Keeps the cluster build lock alive while this process builds, with a signed heartbeat beside
    it for the nodes that wait; a dead builder stops renewing both."""

    def __init__(self, tier: Tier, name: str, token: str, key: str, alive_name: str) -> None:
        super().__init__(name="jitflow-shared-lock", daemon=True)
        self.tier, self.lock_name, self.token = tier, name, token
        self.key, self.alive_name = key, alive_name
        self.done = threading.Event()

    def beat(self) -> None:
        if not self.tier.secret:
            return   # nobody can check an unsigned heartbeat: waiting nodes ignore them
        ttl = self.tier.settings.lock_ttl
        self.tier.call("put", self.alive_name, heartbeat(self.tier.secret, self.key), ttl=ttl)

    def run(self) -> None:
        ttl = self.tier.settings.lock_ttl
        while not self.done.wait(ttl / 3):
            if self.tier.call("renew", self.lock_name, self.token, ttl) is not True:
                log.info("jitflow: lost the shared build lock %s; building on", self.lock_name)
                return
            self.beat()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=self.tier.settings.timeout + 1)


class Turn:
    """This process's part in the shared tier for one key, while it holds the key's local lock.

    `fetch()` returns a verified shared entry (now in the local cache) or None once this process
    is to build; `share()` sends what it built; leaving the `with` block frees the cluster lock.
    """

    def __init__(self, settings: Settings, cache: Cache, key: str) -> None:
        self.tier = tier_for(settings.remote)
        self.cache, self.key = cache, key
        if self.tier is not None:
            persist_at_exit(cache.root)
        self.entry_name, self.lock_name, self.nostore_name, self.alive_name = _names(key)
        self.token: str | None = None
        self.renewer: _Renewer | None = None
        self.shared = False
        self.rejected: set[str] = set()
        self.expect: dict[str, Any] | None = None

    @property
    def configured(self) -> bool:
        """Whether a shared tier is configured at all."""
        return self.tier is not None

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.renewer is not None:
            self.renewer.stop()
        if self.tier is None or self.token is None:
            return
        if exc_type is not None and not self.shared:
            self.tier.call("put", self.nostore_name, b"build failed", ttl=FAILED_TTL)
        self.tier.call("put", self.alive_name, b"released", ttl=1)
        self.tier.call("release", self.lock_name, self.token)

    def fetch(self, expect: dict[str, Any] | None = None) -> tuple[LibraryFile, dict[str, Any]] | None:
        """A shared entry, verified and published locally; or None when this process should build.

        `expect` is the key's inputs: an entry recording others is refused like a bad signature.
        """
        self.expect = expect
        tier = self.tier
        if tier is None or not tier.available():
            return None
        deadline, waiting = time.monotonic() + WAIT_LIMIT, False
        watch: LockWatch | None = None   # made when this node first finds the lock held by another
        while tier.available():
            found = self._load()
            if found is not None:
                return found
            if tier.call("get", self.nostore_name) not in (None, _FAILED):
                break  # whoever builds this key will not share it: build here without waiting
            token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
            acquired = tier.call("acquire", self.lock_name, token, tier.settings.lock_ttl)
            if acquired is _FAILED:
                break  # the tier is down (call said so once): build here, nobody else is waited for
            if acquired is True:
                self.token = token
                self.renewer = _Renewer(tier, self.lock_name, token, self.key, self.alive_name)
                self.renewer.beat()
                self.renewer.start()
                found = self._load()  # shared just before its builder let go of the lock
                if found is not None:
                    return found
                break
            now = time.time()
            watch = watch or LockWatch(tier.secret, self.key, tier.settings.lock_ttl, now)
            if not watch.still_waiting(tier.call("get", self.alive_name), now):
                log.warning("jitflow: the shared build lock of %s is held with no sign of a live builder for "
                            "%.0f s (its lock TTL); building here", self.key[:12], tier.settings.lock_ttl)
                break
            if time.monotonic() > deadline:
                log.warning("jitflow: waited %.0f s for another node to build %s; building here",
                            WAIT_LIMIT, self.key[:12])
                break
            if not waiting:
                waiting = True
                log.info("jitflow: another node is building %s; waiting for its entry", self.key[:12])
            time.sleep(POLL)
        count("misses")
        return None

    def _load(self) -> tuple[LibraryFile, dict[str, Any]] | None:
        assert self.tier is not None
        blob = self.tier.call("get", self.entry_name)
        if blob is None or blob is _FAILED:
            return None
        digest = hashlib.sha256(blob).hexdigest()
        if digest in self.rejected:
            return None
        try:
            # the caller holds the key's lock (pipeline._build_once), and keeps the size cap after it
            found = door.install_bytes(self.cache, self.key, blob, secret=self.tier.secret, expect=self.expect,
                                       locked=True).found
        except (RemoteEntryError, EntryRefusedError) as exc:
            self.rejected.add(digest)
            count("refusals")
            log.warning("jitflow: refused shared entry %s: %s; rebuilding", self.key[:12], exc)
            return None
        count("hits")
        return found

    def share(self) -> None:
        """Send the entry just published locally to the tier, signed, unless it is too large."""
        tier = self.tier
        if tier is None or not tier.available():
            return
        try:
            blob = door.entry_bytes(self.cache.entry_dir(self.key), self.key, secret=tier.secret,
                                    max_bytes=tier.settings.max_bytes)
        except EntryRefusedError as exc:   # pruned or damaged since it was published: nothing to share
            log.warning("jitflow: %s; not shared", exc)
            return
        if blob is None:
            count("too_large")
            log.info("jitflow: %s is larger than JITFLOW_REMOTE_CACHE_MAX_BYTES; not shared", self.key[:12])
            tier.call("put", self.nostore_name, b"too large", ttl=NOSTORE_TTL)
            self.shared = True
            return
        if tier.call("put", self.entry_name, blob) is not _FAILED:
            count("stored")
            self.shared = True


def read_entry(settings: RemoteSettings, key: str) -> tuple[bytes, str | None] | None:
    """The shared entry of `key` as its bytes and the secret they are signed with, read without a
    lock and without writing anything (the read-only cache's look at the tier, which installs them
    through the cache's door: door.install_bytes checks them); None when there is none, or the tier
    is off or down."""
    tier = tier_for(settings)
    if tier is None or not tier.available():
        return None
    blob = tier.call("get", _names(key)[0])
    if blob is None or blob is _FAILED:
        return None
    return blob, tier.secret
