"""The Redis backend of the shared tier: entries are plain keys under 'jitflow:', the lock is
SET NX PX with a random token, renewed and released by small Lua scripts that check the token.

Needs `pip install 'jitflow[redis]'`. Every request gives up after the configured timeout and is
never retried here: a slow or absent server costs one timeout, then jitflow goes on locally.
"""
from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from ...doctor.checks import Check
from ...errors import RemoteCacheError
from .backend import RemoteBackend, shared_check
from .bounded_socket import BoundedSocket, limits

PREFIX = "jitflow:"
#: room for the protocol around the largest value (its length line, the handshake's answers)
_REPLY_SLACK = 64 << 10

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def _bounded_connection(connection: Any) -> None:
    """Called by the client on each new connection: its socket keeps to each request's limits,
    from the handshake (AUTH, SELECT) on."""
    connection._sock = BoundedSocket(connection._sock)
    connection.on_connect()


def _redacted(url: str) -> str:
    """The URL without user name or password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path or '/0'}"


class RedisBackend(RemoteBackend):
    """A Redis (or Valkey, or any server speaking its protocol) database as the shared tier."""

    def __init__(self, url: str, timeout: float) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise RemoteCacheError("the shared tier needs the redis package: pip install 'jitflow[redis]'") from None
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._auth_errors = tuple(getattr(redis.exceptions, name) for name in ("AuthenticationError",
                                  "AuthorizationError") if hasattr(redis.exceptions, name))
        self.url = url
        self.timeout = timeout
        try:
            self.client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                               retry=Retry(NoBackoff(), 0), retry_on_timeout=False,
                                               health_check_interval=0, redis_connect_func=_bounded_connection)
        except ValueError as exc:
            raise RemoteCacheError(f"JITFLOW_REMOTE_CACHE: bad Redis URL {_redacted(url)}: {exc}") from None
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    @classmethod
    def from_url(cls, url: str, timeout: float) -> RedisBackend:
        return cls(url, timeout)

    def _limits(self) -> Any:
        """One request's limits: the timeout for all of it, and the largest answer it may bring."""
        return limits(self.timeout, None if self.max_reply is None else self.max_reply + _REPLY_SLACK)

    def _do(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._limits() as bounds:
            try:
                return fn(*args, **kwargs)
            except self._errors as exc:
                why = bounds.why or f"{type(exc).__name__}: {exc}"
                raise RemoteCacheError(f"Redis {what} at {_redacted(self.url)} failed: {why}") from None

    def get(self, name: str) -> bytes | None:
        return self._do("GET", self.client.get, PREFIX + name)

    def put(self, name: str, data: bytes, ttl: float | None = None) -> None:
        px = max(1, int(ttl * 1000)) if ttl else None
        self._do("SET", self.client.set, PREFIX + name, data, px=px)

    def acquire(self, name: str, token: str, ttl: float) -> bool:
        return bool(self._do("SET NX", self.client.set, PREFIX + name, token, nx=True,
                             px=max(1, int(ttl * 1000))))

    def renew(self, name: str, token: str, ttl: float) -> bool:
        return bool(self._do("lock renewal", self._renew, keys=[PREFIX + name],
                             args=[token, max(1, int(ttl * 1000))]))

    def release(self, name: str, token: str) -> None:
        self._do("lock release", self._release, keys=[PREFIX + name], args=[token])

    def describe(self) -> str:
        return _redacted(self.url)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass

    def check(self) -> list[Check]:
        """Reachable, authenticated, readable and writable, and evicting (when the user may see it)."""
        where = f"Redis at {self.describe()}"
        try:
            with self._limits():
                self.client.ping()
        except self._auth_errors as exc:
            return [shared_check(True, f"{where}: reachable"),
                    shared_check(False, f"{where}: not authenticated ({exc})",
                          "put the user and password in the URL: redis://USER:PASSWORD@host:6379/0 "
                          "(cache/README.md)")]
        except self._errors as exc:
            return [shared_check(False, f"{where}: not reachable ({type(exc).__name__}: {exc})",
                          "start the server (cache/start.sh runs one to try), check host, port, firewall, "
                          "and rediss:// for a server that speaks TLS")]
        results = [shared_check(True, f"{where}: reachable")]
        user = urlsplit(self.url).username or "default"
        has_password = bool(urlsplit(self.url).password)
        results.append(shared_check(has_password, f"{where}: authenticated as {user}" if has_password
                             else f"{where}: the server lets clients in without a password",
                             "" if has_password else "give the server a user and password (cache/README.md)"))
        start = time.perf_counter()
        try:
            self.put("probe", b"ok", ttl=10)
            ok = self.get("probe") == b"ok"
            results.append(shared_check(ok, f"{where}: read and write work "
                                     f"({(time.perf_counter() - start) * 1000:.1f} ms for both)"
                             if ok else f"{where}: a probe written was not read back"))
        except RemoteCacheError as exc:
            results.append(shared_check(False, f"{where}: cannot write ({exc})",
                                 "the server is full without eviction, read-only, or the user may not write "
                                 "jitflow:* keys (cache/README.md)"))
        try:
            with self._limits():
                policy = self.client.config_get("maxmemory-policy").get("maxmemory-policy")
        except self._errors:
            policy = None  # CONFIG is not for the jitflow user: nothing to say
        if policy is not None:
            evicts = policy.startswith("allkeys-")
            results.append(shared_check(evicts, f"{where}: eviction policy {policy}",
                                 "" if evicts else "set maxmemory and maxmemory-policy allkeys-lru "
                                                   "(cache/redis.conf); a full tier refuses new entries"))
        return results
