"""Failed builds leave nothing behind but a bounded set of kept sources, and the error names one
that exists."""
from __future__ import annotations

import kernels
import pytest
from conftest import run_python

import jitflow
from jitflow import errors
from jitflow.cache.store.failed import KEEP
from jitflow.errors import COMMAND_CHARS


def _fail(**options):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", **options)
    with pytest.raises(errors.CompileError) as info:
        exe.jit()
    return info.value


def test_a_failed_build_keeps_its_source_where_the_error_says(cache_dir):
    for i in range(KEEP + 2):
        err = _fail(device_options=[f"--no-such-flag-{i}"])
        source = err.source_path
        assert source is not None and source.is_file(), err
        assert "__global__" in source.read_text() and str(source) in str(err)
        assert source.parent.parent.parent == cache_dir / "v1" / "failed"
    assert len(list((cache_dir / "v1" / "failed").iterdir())) == KEEP   # the newest ones
    assert list((cache_dir / "v1" / "staging").iterdir()) == []
    assert not any((cache_dir / "v1" / "entries").rglob("lib.so"))


def test_a_failed_uncached_build_leaves_nothing_in_the_temporary_folder(cache_dir, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = """
        import jitflow, kernels
        for i in range(3):
            exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cache=False,
                                  device_options=["--no-such-flag"])
            try:
                exe.jit()
            except jitflow.errors.CompileError as exc:
                print(exc.source_path.is_file(), exc.source_path)
    """
    lines = run_python(code, env={"TMPDIR": str(tmp)}).stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("True ") for line in lines), lines
    assert list(tmp.iterdir()) == []


def test_a_long_command_is_cut_in_the_message_and_kept_whole_beside_the_source(cache_dir):
    flags = [f"--no-such-flag-{i}-{'x' * 40}" for i in range(20)]
    err = _fail(device_options=flags)
    command_line = next(line for line in str(err).splitlines() if line.startswith("  command: "))
    assert len(command_line) < COMMAND_CHARS + 200 and f"({len(err.command)} characters; " in command_line
    assert err.command_path == err.source_path.parent.parent / "command.txt"
    assert f"the whole command in {err.command_path})" in command_line
    assert err.command_path.read_text() == err.command + "\n" and flags[-1] in err.command
