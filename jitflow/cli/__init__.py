"""The `jitflow` command: main.py gathers one sub-command per module (build, cache, inspect,
doctor and warm); module_file.py loads the FILE.py:NAME that commands take."""
from .main import main

__all__ = ["main"]
