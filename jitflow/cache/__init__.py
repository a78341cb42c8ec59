"""The cache: the key (key.py), entry folders (entry.py), the disk cache (disk.py), the folder a
process uses (location.py), upkeep (admin.py) and the shared tier behind it (shared/)."""
