"""The build recipe's digest covers every file of the folders that shape a library, subfolders too;
its install memo gives the same digest, and only while no recipe file changed."""
from __future__ import annotations

import shutil
import sys

import pytest

from jitflow.cache.key import recipe
from jitflow.toolchain import install_memo


def test_the_recipe_covers_every_build_file_also_in_subfolders():
    names = {name for name, _ in recipe._files()}
    for folder in recipe.FOLDERS:
        for path in (recipe.PACKAGE / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert path.relative_to(recipe.PACKAGE).as_posix() in names
    assert {"builder/host_c/prelude.py", "builder/host_c/legalize.py", "cache/key/lowering_rules.py"} <= names
    # how a host function's work is outlined, and how the entries' shared object is made
    assert {"builder/host_c/outline.py", "builder/host_c/outline_c.py", "builder/host_c/split.py",
            "formats/compute_functions.py", "toolchain/zig_cc/object_cache.py"} <= names


@pytest.fixture
def copy_of_jitflow(tmp_path, monkeypatch):
    """recipe.digest() over a copy of jitflow's files, its memo in a folder of the test's own."""
    copy = tmp_path / "jitflow"
    shutil.copytree(recipe.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(recipe, "PACKAGE", copy)
    monkeypatch.setattr(install_memo, "folder", lambda: tmp_path / "memo")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    recipe.digest.cache_clear()
    yield copy
    recipe.digest.cache_clear()


def _digest_again() -> str:
    recipe.digest.cache_clear()
    return recipe.digest()


def test_the_memo_gives_the_digest_the_files_give_until_one_changes(copy_of_jitflow, monkeypatch):
    first = recipe.digest()
    assert first == recipe._read_all(recipe._files())              # the files' own digest, memoized
    assert install_memo.read(recipe.MEMO)["digest"] == first

    def no_reading(files):
        raise AssertionError("the files were read although nothing changed")

    with monkeypatch.context() as patch:
        patch.setattr(recipe, "_read_all", no_reading)
        assert _digest_again() == first                                 # taken from the memo

    zig = copy_of_jitflow / "toolchain" / "zig_cc" / "zig.py"
    text = zig.read_text()
    zig.write_text(text.replace('"-O2"', '"-O3"', 1))                  # same size, new bytes
    edited = _digest_again()
    assert edited != first and edited == recipe._read_all(recipe._files())
    (copy_of_jitflow / "builder" / "added.h").write_text("/* a new file */\n")
    added = _digest_again()
    assert added not in (first, edited)
    (copy_of_jitflow / "builder" / "added.h").unlink()
    assert _digest_again() == edited                                   # a removed file too


def test_a_memo_of_another_signature_is_not_used(copy_of_jitflow):
    first = recipe.digest()
    install_memo.write(recipe.MEMO, {"signature": "0" * 64, "digest": "f" * 64})
    assert _digest_again() == first
    install_memo.write(recipe.MEMO, {"signature": recipe.signature(recipe._files()), "digest": 7})
    assert _digest_again() == first                                    # not a digest: read again
