"""zig's version for the key: the wheel's metadata; for a zig without it, what `zig version` says,
asked once and memoized with the binary's stat (asked again when the binary changes)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jitflow.errors import ToolMissingError
from jitflow.toolchain import dist_info, install_memo
from jitflow.toolchain.zig_cc import zig_wheel


def test_the_version_is_the_wheels_own():
    zig_wheel.version.cache_clear()
    wheel = dist_info.version("ziglang", [dist_info.site_of(Path(zig_wheel.zig_binary()).parent)])
    assert wheel and zig_wheel.version() == wheel


@pytest.fixture
def zig_without_metadata(tmp_path, monkeypatch):
    """A stand-in zig that prints its version and counts its runs, with no package metadata."""
    zig = tmp_path / "bin" / "zig"
    zig.parent.mkdir()
    runs = tmp_path / "runs"

    def answer(version: str) -> None:
        zig.write_text(f"#!/bin/sh\necho run >> {runs}\necho {version}\n")
        zig.chmod(0o755)

    answer("0.99.0")
    monkeypatch.setattr(zig_wheel, "zig_binary", lambda: str(zig))
    monkeypatch.setattr(dist_info, "version", lambda dist, sites: None)
    monkeypatch.setattr(install_memo, "folder", lambda: tmp_path / "memo")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    zig_wheel.version.cache_clear()
    yield answer, lambda: len(runs.read_text().split()) if runs.exists() else 0
    zig_wheel.version.cache_clear()


def test_without_metadata_zig_is_asked_once_per_install_and_again_when_it_changes(zig_without_metadata):
    answer, runs = zig_without_metadata
    assert zig_wheel.version() == "0.99.0" and runs() == 1
    zig_wheel.version.cache_clear()                     # a new process
    assert zig_wheel.version() == "0.99.0" and runs() == 1
    answer("0.99.1")                                    # another zig in its place
    zig_wheel.version.cache_clear()
    assert zig_wheel.version() == "0.99.1" and runs() == 2


def test_a_zig_that_does_not_run_is_a_clear_error_and_is_not_memoized(zig_without_metadata, tmp_path):
    (tmp_path / "bin" / "zig").write_text("#!/bin/sh\nexit 3\n")
    with pytest.raises(ToolMissingError, match="zig does not run"):
        zig_wheel.version()
    assert install_memo.read(zig_wheel.MEMO) is None
