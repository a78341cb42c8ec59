"""The cache: the key (key.py: what it covers, made in one place) and what goes into it beyond the IR
(recipe.py: jitflow's own build code; registrations.py and lowering_rules.py: TVM registrations),
entry folders (entry.py), the disk cache (disk.py), the one way to open a cache and the location
rules (location.py), the sources of failed builds (failed.py), upkeep (admin.py) and the shared
tier behind it (shared/)."""
