"""A read-only miss says why, and its fix fits the why: CacheMissError.kind is missing, unreadable,
untrusted, damaged, other-inputs or uncacheable, each with its own fix in the message; other-inputs
names the key inputs that differ from the cache's entry for the same module and target. Real files
and modes; the unreadable cases, and the writable mode's warning on a cache root owns, as the user
nobody in a process of its own.

Three kernels are built once for the file, all at one line (kernel() below): an entry for "the same
module" is one with the same label and, without a name, the same file and line it was compiled at.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import kernels
import models
import pytest
from conftest import OTHER_UID, module_cache, needs_root
from other_user import other_user
from test_readonly import listing

import jitflow
from jitflow.errors import CacheMissError

SALTED, CONFIGURED, PLAIN = 71.0, 72.0, 73.0


def kernel(scale: float, **options):
    """axpb(scale) for the CPU: every build and lookup of this file is compiled here, at one line."""
    return jitflow.compile(kernels.axpb(scale), "c", **options)


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """A cache of three entries: a salted one, one with a pass_config value, and a plain one."""
    with module_cache(tmp_path_factory, zig_cache, "miss-kinds") as cache:
        kernel(SALTED, cache_salt="one").build()
        kernel(CONFIGURED, pass_config={"tirx.disable_vectorize": True}).build()
        kernel(PLAIN).build()
        yield cache


def _copy(built: Path, dest: Path) -> Path:
    shutil.copytree(built, dest, symlinks=True)
    return dest


def _miss(scale: float, cache: Path, **options) -> CacheMissError:
    with pytest.raises(CacheMissError) as caught:
        kernel(scale, cache="readonly", cache_dir=cache, **options).build()
    return caught.value


def test_a_cache_folder_that_is_not_there_says_to_check_the_setting(tmp_path):
    error = _miss(PLAIN, tmp_path / "nothing" / "here")
    assert error.kind == "missing" and "does not exist" in str(error)
    assert f"check JITFLOW_CACHE_DIR (it names {tmp_path / 'nothing' / 'here'})" in str(error)
    assert not (tmp_path / "nothing").exists()


def test_a_module_the_cache_never_held_says_to_record_and_pack(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    with pytest.raises(CacheMissError) as caught:
        jitflow.compile(kernels.axpb(79.0), "c", name="never-built", cache="readonly", cache_dir=cache).build()
    error = caught.value
    assert error.kind == "missing" and error.differences == []
    assert "has no entry for key" in str(error) and "module never-built" in str(error)
    assert "JITFLOW_RECORD=record.jsonl" in error.fix and "jitflow cache pack" in str(error)


def test_another_salt_is_named(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    before = listing(cache)
    error = _miss(SALTED, cache, cache_salt="two")
    assert error.kind == "other-inputs"
    assert error.differences == ["options.salt: here two, in the cache one"]
    assert "options.salt: here two, in the cache one" in str(error) and "JITFLOW_CACHE_SALT" in error.fix
    assert listing(cache) == before


def test_another_pass_config_value_is_named(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    error = _miss(CONFIGURED, cache, pass_config={"tirx.disable_vectorize": False})
    assert error.kind == "other-inputs"
    assert error.differences == ["options.pass_context.config.tirx.disable_vectorize: here False, in the cache True"]
    assert f"compiled at {__file__}:" in str(error)       # where this module was compiled: kernel() above


def test_a_damaged_entry_says_to_unpack_again(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    library = next(cache.glob(f"v1/entries/*/{kernel(PLAIN).key}/lib.so"))
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0x40
    library.write_bytes(bytes(data))
    error = _miss(PLAIN, cache)
    assert error.kind == "damaged" and "sha256" in error.reason
    assert "has a damaged entry" in str(error) and "unpack the bundle again" in error.fix


@needs_root
def test_another_users_cache_says_to_unpack_as_root_or_this_user(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    subprocess.run(["chown", "-R", str(OTHER_UID), str(cache)], check=True)
    error = _miss(PLAIN, cache)
    assert error.kind == "untrusted" and "belongs to another user" in error.reason
    assert f"unpack as root or as this user (uid {os.getuid()})" in str(error)


def test_an_entry_others_can_write_is_untrusted(built, tmp_path):
    cache = _copy(built, tmp_path / "cache")
    folder = next(cache.glob(f"v1/entries/*/{kernel(PLAIN).key}"))
    folder.chmod(0o777)
    error = _miss(PLAIN, cache)
    assert error.kind == "untrusted" and "writable by group or others" in error.reason


def test_a_module_that_cannot_be_cached_says_what_to_capture(tmp_path):
    from tvm.relax.pipeline import PIPELINE_MAP
    from tvm.relax.transform import FoldConstant

    PIPELINE_MAP["jitflow_miss_test"] = lambda p=FoldConstant(), **kw: p     # holds what the key cannot name
    try:
        with pytest.raises(CacheMissError) as caught:
            jitflow.compile(models.mlp(), "c", relax_pipeline="jitflow_miss_test", cache="readonly",
                            cache_dir=tmp_path).build()
    finally:
        del PIPELINE_MAP["jitflow_miss_test"]
    assert caught.value.kind == "uncacheable" and "cache_salt=" in caught.value.fix


#: as nobody: a cache whose v1/ only root may read, one below a folder only root may enter, and the
#: writable mode on a cache root owns (its warning, before it falls back to a private folder)
AS_NOBODY = """
    import json, logging, sys
    import jitflow, kernels
    from jitflow.cache.store import location
    from jitflow.config import resolve
    from jitflow.errors import CacheMissError
    out = {}
    for name, cache in json.loads(sys.argv[1]).items():
        try:
            jitflow.compile(kernels.axpb(73.0), "c", cache="readonly", cache_dir=cache).build()
        except CacheMissError as exc:
            out[name] = [exc.kind, exc.fix, str(exc)]
    print(json.dumps(out))
    folder = location.open_cache(resolve(cache=True, cache_dir=sys.argv[2])).for_building().folder
    print(json.dumps(str(folder)))
"""


def test_as_another_user_an_unreadable_cache_says_which_chmod_and_root_owned_says_readonly(built):
    user = other_user()
    top = Path(tempfile.mkdtemp(prefix="jitflow-miss-test-"))
    try:
        top.chmod(0o755)
        private_v1 = _copy(built, top / "private-v1")
        subprocess.run(["chmod", "-R", "go+rX", str(private_v1)], check=True)
        (private_v1 / "v1").chmod(0o700)
        closed = top / "closed"
        closed.mkdir(mode=0o700)
        below = _copy(built, closed / "cache")
        served = _copy(built, top / "served")
        subprocess.run(["chmod", "-R", "go+rX", str(served)], check=True)
        scratch = top / "tmp"
        scratch.mkdir()
        scratch.chmod(0o1777)
        env = user.env(HOME=str(top / "no-home"), TMPDIR=str(scratch), JITFLOW_ZIG_CACHE_DIR=str(top / "zig-never"),
                       JITFLOW_RECORD="", JITFLOW_CACHE_DIR="")
        caches = {"private v1": str(private_v1), "closed parent": str(below)}
        proc = user.run(["-c", textwrap.dedent(AS_NOBODY), json.dumps(caches), str(served)], env=env, cwd=top)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        found, fallback = json.loads(lines[-2]), json.loads(lines[-1])
        kind, fix, text = found["private v1"]
        assert kind == "unreadable" and f"uid {user.uid}" in fix and f"chmod -R go+rX {private_v1}" in fix, text
        assert "--readable" in fix and "cannot be read by this user" in text
        kind, fix, text = found["closed parent"]
        assert kind == "unreadable" and f"chmod go+rx {closed}" in fix, text
        assert fallback == str(scratch / f"jitflow-{user.uid}")
        (warning,) = [line for line in proc.stderr.splitlines() if str(served) in line]
        assert "belongs to root" in warning and "JITFLOW_CACHE=readonly" in warning and fallback in warning
    finally:
        shutil.rmtree(top, ignore_errors=True)
