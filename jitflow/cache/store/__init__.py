"""The cache on disk: the entry folder and its checks (entry.py), the disk cache (disk.py) and the
staging folders builds and unpacks lay entries out in (staging.py), the per-key build lock
(key_lock.py), the one opener of a cache and the location rules (location.py), its use counted
across processes (counters.py), upkeep: ls, prune, clear (admin.py), and the kept sources of failed
builds (failed.py)."""
