"""A deadline for each whole request to the shared tier and a cap on the bytes it may receive.

A socket timeout bounds one read: a server that sends one byte a second never trips it, and a
request for a 90-byte answer takes 90 s. And a client reads an answer of any announced length:
a 300 MB value costs its size several times over before anything can refuse it. So the backend
wraps each connection's socket in a BoundedSocket and runs every request inside `limits()`:
before each read or write the socket is given what is left of the request's time, and the bytes
received are counted; past either, the socket raises an OSError (which the Redis client turns
into its own error and a closed connection) and `limits()` says why.

The limits are per thread (the client runs each request in the calling thread), so the build's
requests and the lock renewer's do not share a budget.
"""
from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator


class _Limits(threading.local):
    deadline: float | None = None
    budget: int | None = None
    received: int = 0
    why: str | None = None


_LIMITS = _Limits()
_TOO_SLOW = "no complete answer within the timeout (JITFLOW_REMOTE_CACHE_TIMEOUT)"


class RequestLimitError(ConnectionAbortedError):
    """A request ran past its deadline or its byte budget."""


@contextmanager
def limits(timeout: float, max_bytes: int | None) -> Iterator[_Limits]:
    """Bound the requests made in this block (this thread) to `timeout` seconds in all and
    `max_bytes` bytes received; the yielded object's `why` says which limit stopped one."""
    saved = (_LIMITS.deadline, _LIMITS.budget, _LIMITS.received, _LIMITS.why)
    _LIMITS.deadline, _LIMITS.budget = time.monotonic() + timeout, max_bytes
    _LIMITS.received, _LIMITS.why = 0, None
    try:
        yield _LIMITS
    finally:
        _LIMITS.deadline, _LIMITS.budget, _LIMITS.received, _LIMITS.why = saved


class BoundedSocket:
    """A socket whose reads and writes keep to the limits of the request in progress (none outside one)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._wanted = sock.gettimeout()    # the client's own timeout (0 for a poll), never raised here

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, value: float | None) -> None:
        self._wanted = value
        self._sock.settimeout(value)

    def gettimeout(self) -> float | None:
        return self._wanted

    def _time_left(self) -> None:
        if _LIMITS.deadline is None:
            self._sock.settimeout(self._wanted)
            return
        left = _LIMITS.deadline - time.monotonic()
        if left <= 0:
            _LIMITS.why = _TOO_SLOW
            raise RequestLimitError(_LIMITS.why)
        self._sock.settimeout(left if self._wanted is None else min(left, self._wanted))

    def _io(self, op: Any, *args: Any) -> Any:
        self._time_left()
        try:
            return op(*args)
        except socket.timeout:
            if _LIMITS.deadline is not None and time.monotonic() >= _LIMITS.deadline:
                _LIMITS.why = _TOO_SLOW
            raise

    def _count(self, received: int) -> int:
        _LIMITS.received += received
        if _LIMITS.budget is not None and _LIMITS.received > _LIMITS.budget:
            _LIMITS.why = (f"an answer larger than {_LIMITS.budget} bytes "
                           "(JITFLOW_REMOTE_CACHE_MAX_BYTES) was refused")
            raise RequestLimitError(_LIMITS.why)
        return received

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        return self._count(self._io(self._sock.recv_into, buffer, nbytes, flags))

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = self._io(self._sock.recv, bufsize, flags)
        self._count(len(data))
        return data

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._io(self._sock.sendall, data, flags)
