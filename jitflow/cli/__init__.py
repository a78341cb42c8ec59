"""The `jitflow` command: main.py gathers one sub-command per module (build, inspect, cache with
cache_prune, doctor and warm) and maps errors onto exit codes (exit_codes.py); build_options.py
declares the build options build and inspect share, module_file.py loads the FILE.py:NAME they
take, cache_common.py and output.py hold what the commands print with."""
from .main import main

__all__ = ["main"]
