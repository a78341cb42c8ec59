"""Labels that tell entries apart: where a module was compiled (the caller's file and line, found
outside jitflow's own frames) is kept with its entry, not in its key, and shown by `cache ls`, the
record and a read-only miss; the command line's FILE.py:NAME is its label, in the record too when
the entry was built elsewhere without a name."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import kernels
import pytest
from conftest import TESTS, module_cache

sys.path.insert(0, str(TESTS / "cli"))
from cli_run import jf  # noqa: E402

import jitflow  # noqa: E402
from jitflow.errors import CacheMissError  # noqa: E402

HERE = Path(__file__)


def _line_of(text: str) -> int:
    """The line of this file that holds `text` (the call site a test compiles at)."""
    return next(n for n, line in enumerate(HERE.read_text().splitlines(), 1) if text in line and "_line_of" not in line)


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """A cache holding axpb(81) compiled at one line of this file, and its record."""
    with module_cache(tmp_path_factory, zig_cache, "origin") as cache:
        record = cache.parent / "record.jsonl"
        exe = jitflow.compile(kernels.axpb(81.0), "c", record=record)   # the call site: origin-81
        exe.build()
        yield cache, exe, record


def test_the_entry_keeps_where_it_was_compiled_and_the_key_does_not(built):
    cache, exe, _ = built
    meta = json.loads(next(cache.glob(f"v1/entries/*/{exe.key}/meta.json")).read_text())
    assert meta["origin"] == f"{HERE}:{_line_of('# the call site: origin-81')}"
    assert jitflow.compile(kernels.axpb(81.0), "c").key == exe.key      # compiled elsewhere: the same key


def test_cache_ls_the_record_and_a_miss_show_it(built, tmp_path):
    cache, exe, record = built
    line = _line_of("# the call site: origin-81")
    proc = jf("cache", "ls", "--cache-dir", str(cache))
    assert f"main at {HERE.name}:{line}" in proc.stdout, proc.stdout
    (entry,) = json.loads(jf("cache", "ls", "--cache-dir", str(cache), "--json").stdout)["entries"]
    assert entry["origin"] == f"{HERE}:{line}"
    (recorded,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert recorded["origin"] == f"{HERE}:{line}" and recorded["label"] == "main"
    with pytest.raises(CacheMissError) as caught:
        jitflow.compile(kernels.axpb(82.0), "c", cache="readonly", cache_dir=cache).build()   # miss-82
    assert caught.value.origin == f"{HERE}:{_line_of('# miss-82')}"
    assert f"compiled at {HERE}:{_line_of('# miss-82')}" in str(caught.value)


def test_the_command_line_records_its_file_and_name_for_an_entry_built_without_a_name(built, tmp_path):
    cache, exe, _ = built
    (tmp_path / "model.py").write_text("import kernels\nmod = kernels.axpb(81.0)\n")
    spec, record = f"{tmp_path / 'model.py'}:mod", tmp_path / "record.jsonl"
    proc = jf("build", spec, "--target", "c", "-o", str(tmp_path / "a.so"), "--cache-dir", str(cache),
              "--record", str(record))
    assert proc.returncode == 0 and ": hit " in proc.stdout, proc.stderr
    (recorded,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert recorded["key"] == exe.key and recorded["label"] == spec and recorded["outcome"] == "hit"


def test_a_module_file_that_compiles_at_import_is_its_origin(tmp_path, cache_dir):
    """FILE.py:NAME naming an Executable: the file's own line is where it was compiled; a module the
    command line compiles itself has no origin but its label."""
    (tmp_path / "model.py").write_text('import jitflow, kernels\n\nexe = jitflow.compile(kernels.axpb(83.0), "c")\n'
                                       "mod = kernels.axpb(84.0)\n")
    for name, target in (("exe", []), ("mod", ["--target", "c"])):
        proc = jf("build", f"{tmp_path / 'model.py'}:{name}", *target, "-o", str(tmp_path / f"{name}.so"))
        assert proc.returncode == 0, proc.stderr
    rows = {e["name"]: e for e in json.loads(jf("cache", "ls", "--json").stdout)["entries"]}
    assert rows[f"{tmp_path / 'model.py'}:exe"]["origin"] == f"{tmp_path / 'model.py'}:3"
    assert rows[f"{tmp_path / 'model.py'}:mod"]["origin"] is None
