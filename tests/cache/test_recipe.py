"""The build recipe's digest covers every file of the folders that shape a library, subfolders too."""
from __future__ import annotations

from jitflow.cache import recipe


def test_the_recipe_covers_every_build_file_also_in_subfolders():
    names = {name for name, _ in recipe._files()}
    for folder in recipe.FOLDERS:
        for path in (recipe.PACKAGE / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert path.relative_to(recipe.PACKAGE).as_posix() in names
    assert {"builder/host_c/prelude.py", "builder/host_c/legalize.py", "cache/lowering_rules.py"} <= names
    # how a host function's work is outlined, and how the entries' shared object is made
    assert {"builder/host_c/outline.py", "builder/host_c/outline_c.py", "builder/host_c/split.py",
            "formats/compute_functions.py", "toolchain/object_cache.py"} <= names
