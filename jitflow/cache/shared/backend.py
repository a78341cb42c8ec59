"""The shared cache tier's interface: a store of named bytes with an expiring lock, chosen by URL.

Redis is the first backend (redis_backend.py); JITFLOW_REMOTE_CACHE=module:Class selects another.
How the tier takes part in a build is tier.py; this module also answers `check()` for the doctor
command.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

from ...config import RemoteSettings, resolve_remote
from ...doctor.checks import Check
from ...errors import RemoteCacheError

#: URL schemes -> "module:Class" of the backend that serves them.
SCHEMES = {
    "redis": "jitflow.cache.shared.redis_backend:RedisBackend",
    "rediss": "jitflow.cache.shared.redis_backend:RedisBackend",
    "unix": "jitflow.cache.shared.redis_backend:RedisBackend",
}

def shared_check(ok: bool, detail: str, fix: str = "") -> Check:
    """A line of the shared tier's health check (never required: a tier that fails means local builds)."""
    return Check("shared cache", ok, detail, fix, required=False)


class RemoteBackend(ABC):
    """A store of named byte strings with an expiring lock; names look like 'v1:entry:<key>'.

    Methods raise RemoteCacheError (or anything else: the caller treats every exception as the
    tier failing) and must give up within the timeout they were built with, for the whole request.
    """

    #: the largest value a request may bring back (JITFLOW_REMOTE_CACHE_MAX_BYTES, set by
    #: open_backend); a backend refuses a larger answer rather than holding it (None: no cap)
    max_reply: int | None = None

    @classmethod
    def from_url(cls, url: str, timeout: float) -> RemoteBackend:
        """Build the backend from JITFLOW_REMOTE_CACHE (for module:Class backends, that string)."""
        return cls()

    @abstractmethod
    def get(self, name: str) -> bytes | None:
        """The bytes stored under `name`, or None."""

    @abstractmethod
    def put(self, name: str, data: bytes, ttl: float | None = None) -> None:
        """Store `data` under `name` (replacing it), forgotten after `ttl` seconds if given."""

    @abstractmethod
    def acquire(self, name: str, token: str, ttl: float) -> bool:
        """Take the lock `name` for `ttl` seconds unless another token holds it."""

    @abstractmethod
    def renew(self, name: str, token: str, ttl: float) -> bool:
        """Extend the lock to `ttl` seconds from now if `token` still holds it; False if it was lost."""

    @abstractmethod
    def release(self, name: str, token: str) -> None:
        """Free the lock if `token` holds it."""

    def describe(self) -> str:
        """Where the tier is, without secrets (for messages)."""
        return type(self).__name__

    def check(self) -> list[Check]:
        """Health of the store for `doctor`: by default, a probe written and read back."""
        try:
            self.put("probe", b"ok", ttl=10)
            ok = self.get("probe") == b"ok"
        except Exception as exc:
            return [shared_check(False, f"shared tier {self.describe()}: {exc}", "see the backend's documentation")]
        return [shared_check(ok, f"shared tier {self.describe()}: " + ("read and write work" if ok else "probe lost"))]

    def close(self) -> None:
        """Drop connections (the backend is not used afterwards)."""


def open_backend(url: str, timeout: float, max_reply: int | None = None) -> RemoteBackend:
    """The backend for a JITFLOW_REMOTE_CACHE value: a URL (redis://...) or module:Class; its
    requests give up after `timeout` seconds and refuse answers over `max_reply` bytes."""
    if "://" in url:
        scheme = url.split("://", 1)[0].lower()
        target = SCHEMES.get(scheme)
        if target is None:
            raise RemoteCacheError(f"JITFLOW_REMOTE_CACHE: unknown scheme {scheme!r}; "
                                   f"use one of {', '.join(s + '://' for s in SCHEMES)} or module:Class")
    elif ":" in url:
        target = url
    else:
        raise RemoteCacheError(f"JITFLOW_REMOTE_CACHE={url!r} is neither a URL (redis://host:6379/0) "
                               "nor module:Class")
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise RemoteCacheError(f"cannot load the shared-tier backend {target}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, RemoteBackend)):
        raise RemoteCacheError(f"{target} is not a jitflow.cache.shared.RemoteBackend")
    backend = cls.from_url(url, timeout)
    backend.max_reply = max_reply
    return backend


def _signing_check(settings: RemoteSettings) -> Check:
    if settings.secret:
        return shared_check(True, "signing key set: shared entries are signed and checked (JITFLOW_REMOTE_CACHE_KEY)")
    new_key = "python -c 'import secrets; print(secrets.token_hex(32))'"
    if settings.unsigned:
        return shared_check(False, "shared entries are not signed (JITFLOW_REMOTE_CACHE_UNSIGNED=1): anyone who can "
                     "write to the tier can run code on every node",
                     f"set JITFLOW_REMOTE_CACHE_KEY to one secret on every node (make one: {new_key})")
    return shared_check(False, "no signing key: the shared tier is off (JITFLOW_REMOTE_CACHE_KEY is unset)",
                 f"set JITFLOW_REMOTE_CACHE_KEY to one secret on every node (make one: {new_key})")


def check(settings: RemoteSettings | None = None) -> list[Check]:
    """Health of the shared tier for `doctor`: configured, backend loads, reachable, authenticated,
    readable and writable (per backend), signing key set. Never raises."""
    settings = settings or resolve_remote()
    if not settings.url:
        return [shared_check(True, "shared cache tier: not configured (JITFLOW_REMOTE_CACHE unset); local cache only")]
    if settings.url_problem:
        return [shared_check(False, settings.url_problem, "write JITFLOW_REMOTE_CACHE as "
                             "redis://USER:PASSWORD@host:6379/0 (cache/README.md)"), _signing_check(settings)]
    try:
        backend = open_backend(settings.url, settings.timeout, settings.max_bytes)
    except RemoteCacheError as exc:
        return [shared_check(False, str(exc), "fix JITFLOW_REMOTE_CACHE, or install the backend "
                                       "(pip install 'jitflow[redis]')"), _signing_check(settings)]
    try:
        results = list(backend.check())
    except Exception as exc:  # a third-party backend's check must not break doctor
        results = [shared_check(False, f"shared tier {backend.describe()}: check failed: {exc}")]
    finally:
        backend.close()
    return results + [_signing_check(settings)]
