"""The shared cache tier behind each machine's disk cache: how a build takes part (tier.py), the
backend interface (backend.py) and Redis (redis_backend.py), a deadline and a byte cap for each
request (bounded_socket.py) and this machine's counters (stats.py); the entries it holds are the
signed bytes the cache's door hands out and takes in (door.entry_bytes, door.install_bytes).

A backend of your own subclasses RemoteBackend and is named as JITFLOW_REMOTE_CACHE=module:Class.
"""
from .backend import RemoteBackend

__all__ = ["RemoteBackend"]
