"""The sources of failed builds, kept so that a CompileError points at a file that exists.

A build folder (staging, or a temporary one with the cache off) is removed when its build fails;
its src/ moves first to <cache>/v1/failed/<key prefix>.<random>/, and the error is raised again
naming the source there. A compiler command longer than the message quotes is written beside it
(command.txt). Only the newest KEEP failed builds are kept.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from ...errors import COMMAND_CHARS, CompileError, UntrustedFolderError
from ...files import folder_trust
from .entry import SOURCES

log = logging.getLogger("jitflow")
KEEP = 10
#: the file beside the kept sources that holds a long command whole
COMMAND_FILE = "command.txt"


def keep_sources(root: Path, key: str, build_folder: Path, error: CompileError) -> CompileError:
    """Move `build_folder`'s sources under root/failed and return `error` pointing there (or, if they
    cannot be kept, pointing nowhere rather than at a file about to disappear)."""
    failed = root / "failed"
    try:
        folder_trust.make_private_folder(failed)
        dest = Path(tempfile.mkdtemp(prefix=f"{key[:16]}.", dir=failed))
        if (build_folder / SOURCES).is_dir():
            shutil.move(str(build_folder / SOURCES), str(dest / SOURCES))
        command = None
        if len(error.command) > COMMAND_CHARS:
            command = dest / COMMAND_FILE
            command.write_text(error.command + "\n")
        _bound(failed)
    except (OSError, UntrustedFolderError) as exc:   # a folder others could write is not used
        log.info("jitflow: could not keep the sources of a failed build: %s", exc)
        return error.with_source(None)
    source = error.source_path
    if source is not None:
        try:
            source = dest / Path(source).resolve().relative_to(build_folder.resolve())
        except ValueError:
            pass  # a source outside the build folder: it was not moved
    return error.with_source(source if source is None or source.exists() else None, command)


def _bound(failed: Path) -> None:
    """Remove all but the newest KEEP kept builds."""
    kept = []
    for folder in failed.iterdir():
        try:
            kept.append((folder.stat().st_mtime, folder))
        except OSError:
            continue
    kept.sort(reverse=True)
    for _, folder in kept[KEEP:]:
        shutil.rmtree(folder, ignore_errors=True)

