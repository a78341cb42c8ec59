"""The shared cache tier behind each machine's disk cache: how a build takes part (tier.py), the
backend interface (backend.py) and Redis (redis_backend.py), the signed entry bytes
(entry_format.py) and this machine's counters (stats.py).

A backend of your own subclasses RemoteBackend and is named as JITFLOW_REMOTE_CACHE=module:Class.
"""
from .backend import RemoteBackend

__all__ = ["RemoteBackend"]
