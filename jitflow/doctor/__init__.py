"""What this machine has for jitflow, as `jitflow doctor` reports it (checks.py): TVM and its pinned
dependencies, zig, the CUDA compilers and driver, the cache folder. The shared tier's backends answer
with the same `Check`. Nothing here is part of the build recipe: a change to a check changes no key."""
