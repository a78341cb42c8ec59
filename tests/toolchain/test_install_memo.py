"""The install memos: JSON beside jitflow's bytecode, written atomically and only where bytecode is;
anything damaged, too large or missing reads as no memo."""
from __future__ import annotations

import os
import stat
import sys
import threading

import pytest
from hostile_files import plant

from jitflow.toolchain import install_memo


@pytest.fixture
def memo_folder(tmp_path, monkeypatch):
    folder = tmp_path / "__pycache__"
    monkeypatch.setattr(install_memo, "folder", lambda: folder)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return folder


def test_a_memo_reads_back_what_was_written_and_is_replaced_whole(memo_folder):
    assert install_memo.read("facts") is None
    install_memo.write("facts", {"names": ["a", "b"], "count": 2})
    assert install_memo.read("facts") == {"names": ["a", "b"], "count": 2}
    install_memo.write("facts", {"count": 3})
    assert install_memo.read("facts") == {"count": 3}
    assert [p.name for p in memo_folder.iterdir()] == ["jitflow-facts.json"]      # no temporary file left
    assert stat.S_IMODE((memo_folder / "jitflow-facts.json").stat().st_mode) == 0o600


def test_nothing_is_written_where_bytecode_is_not(memo_folder, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    install_memo.write("facts", {"count": 1})
    assert not memo_folder.exists()


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b" " * (install_memo.MAX_BYTES + 1)])
def test_a_damaged_or_oversized_memo_reads_as_none(memo_folder, data):
    memo_folder.mkdir()
    (memo_folder / "jitflow-facts.json").write_bytes(data)
    assert install_memo.read("facts") is None


def test_a_folder_that_cannot_be_made_is_left_alone(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("in the way")
    monkeypatch.setattr(install_memo, "folder", lambda: tmp_path / "file" / "__pycache__")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    install_memo.write("facts", {"count": 1})     # no error
    assert install_memo.read("facts") is None


def test_memos_live_where_python_keeps_this_package_s_bytecode():
    import importlib.util

    expected = importlib.util.cache_from_source(install_memo.__file__)
    assert install_memo.folder() == type(install_memo.folder())(expected).parent


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("how", ["a FIFO", "a link", "another user's", "writable by others"])
def test_a_memo_not_as_jitflow_wrote_it_reads_as_none(memo_folder, tmp_path, how):
    install_memo.write("facts", {"count": 1})
    memo = memo_folder / "jitflow-facts.json"
    assert plant(memo, how, tmp_path)
    found = []
    reader = threading.Thread(target=lambda: found.append(install_memo.read("facts")), daemon=True)
    reader.start()
    reader.join(60)
    try:
        assert found == [None]
        install_memo.write("facts", {"count": 2})                # replaced, never written through
        assert install_memo.read("facts") == {"count": 2} and stat.S_ISREG(memo.lstat().st_mode)
    finally:
        if reader.is_alive():
            os.close(os.open(memo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_recipe_digest_memo_of_another_shape_is_not_used(memo_folder):
    from jitflow.cache.key import recipe

    recipe.digest.cache_clear()
    real = recipe.digest()
    memo = install_memo.read(recipe.MEMO)
    assert memo["digest"] == real
    install_memo.write(recipe.MEMO, dict(memo, digest="../not a digest"))
    recipe.digest.cache_clear()
    try:
        assert recipe.digest() == real
    finally:
        recipe.digest.cache_clear()
