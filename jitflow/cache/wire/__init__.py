"""The bytes an entry travels as between machines: a build farm worker's reply and the shared tier's
entries (entry_format.py). Only the cache's door (door.py) writes and reads them."""
