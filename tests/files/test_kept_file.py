"""Files kept between processes, read back as untrusted input: only a regular file of this user, in
folders of this user, that no one else can write, bounded in size, opened without following a link
or blocking on a FIFO; written whole, replacing (never writing through) whatever is at the name."""
from __future__ import annotations

import os
import stat
import threading

import pytest
from hostile_files import NOBODY, plant

from jitflow.files import kept_file



@pytest.fixture
def kept(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True, mode=0o700)
    path = root / "sub" / "memo.json"
    assert kept_file.write_bytes(path, b'{"a": 1}')
    return root, path


def test_what_is_written_reads_back_and_is_private(kept):
    root, path = kept
    assert kept_file.read_json(path, 100, root) == {"a": 1} == kept_file.read_json(path, 100)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and os.listdir(path.parent) == ["memo.json"]
    assert kept_file.read_bytes(path, 100, root, head=2) == b'{"'
    assert kept_file.sha256(path, 100, root) is not None and kept_file.problem(path, 100, root) is None


def _spoil(root, path, how, tmp_path):
    if plant(path, how, tmp_path):
        return
    if how == "oversized":
        path.write_bytes(b" " * 101)
    elif how == "in another user's folder":
        os.chown(path.parent, NOBODY, NOBODY)
    elif how == "in a folder others can write":
        path.parent.chmod(0o777)
    elif how == "through a linked folder":
        moved = tmp_path / "moved"
        path.parent.rename(moved)
        (root / "sub").symlink_to(moved)


HOWS = ["a link", "a FIFO", "another user's", "writable by others", "oversized", "in another user's folder",
        "in a folder others can write", "through a linked folder"]


@pytest.mark.skipif(os.getuid() != 0, reason="giving files to another user needs root")
@pytest.mark.parametrize("how", HOWS)
def test_a_file_not_as_written_is_not_read(kept, tmp_path, how, caplog):
    root, path = kept
    _spoil(root, path, how, tmp_path)
    found = []
    reader = threading.Thread(target=lambda: found.append(kept_file.read_json(path, 100, root)), daemon=True)
    reader.start()
    reader.join(60)
    try:
        assert found == [None]
        assert kept_file.problem(path, 100, root) is not None
        assert kept_file.sha256(path, 100, root) is None
        assert "not using" in caplog.text
    finally:
        if reader.is_alive():
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_writing_replaces_a_link_or_fifo_without_writing_through(kept, tmp_path):
    root, path = kept
    target = tmp_path / "target"
    target.write_bytes(b"theirs")
    path.unlink()
    path.symlink_to(target)
    assert kept_file.write_bytes(path, b"ours")
    assert target.read_bytes() == b"theirs" and not path.is_symlink() and path.read_bytes() == b"ours"
    path.unlink()
    os.mkfifo(path)
    assert kept_file.write_bytes(path, b"ours again") and path.read_bytes() == b"ours again"


def test_a_private_folder_is_made_or_refused(tmp_path):
    assert kept_file.private_folder(tmp_path / "new")
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    (tmp_path / "link").symlink_to(tmp_path / "new")
    assert not kept_file.private_folder(tmp_path / "link")
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    assert not kept_file.private_folder(tmp_path / "open")
