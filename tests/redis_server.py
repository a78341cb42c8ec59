"""A real redis-server on a free loopback port, run with the repository's cache/redis.conf.

jitflow connects as the user 'jitflow' (limited to jitflow:* keys, as cache/README.md advises);
tests and benchmarks inspect and damage the tier through `admin()`, the default user.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CONF = Path(__file__).resolve().parent.parent / "cache" / "redis.conf"
JITFLOW_ACL = ["~jitflow:*", "resetchannels", "-@all", "+@read", "+@write", "+@scripting", "+ping", "-@dangerous"]


def redis_missing() -> str | None:
    """Why a real tier cannot run here (None when it can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis package is not installed (pip install 'jitflow[redis]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process; `url` is what jitflow uses, `admin()` a client with every right."""

    def __init__(self) -> None:
        self.port = free_port()
        self.password = secrets.token_hex(8)
        self.admin_password = secrets.token_hex(8)
        self.dir = Path(tempfile.mkdtemp(prefix="jitflow-redis-"))
        self.url = f"redis://jitflow:{self.password}@127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> RedisServer:
        args = ["redis-server", str(CONF), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                "--requirepass", self.admin_password, "--user", "jitflow", "on", f">{self.password}", *JITFLOW_ACL]
        self.log = open(self.dir / "redis.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.admin().ping():
                    return self
            except Exception:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited: {(self.dir / 'redis.log').read_text()}")
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start in time")

    def admin(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.admin_password, socket_timeout=5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def entry_names(self) -> list[bytes]:
        return sorted(self.admin().scan_iter(match="jitflow:v*:entry:*"))


def required_in_ci() -> bool:
    """CI sets JITFLOW_REQUIRE_REDIS=1 (and CI=true): there the tier's tests must run, not skip."""
    return bool(os.environ.get("JITFLOW_REQUIRE_REDIS") or os.environ.get("CI"))
