"""Outputs named by one of the process's own open files (/dev/stdout, /proc/self/fd/N, a link to one):
written through, never replaced. Real processes whose standard output is a file or a pipe."""
from __future__ import annotations

import os
import pty
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from cli_run import cache_env
from conftest import ROOT, TESTS

import jitflow
from jitflow.errors import InvalidInputError
from jitflow.files.export_path import destination

pytestmark = pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="this system's /dev/stdout is no link")

VECADD = f"{ROOT / 'examples' / 'vecadd_cpu.py'}:vecadd"


def _run(args: list[str], env: dict[str, str], stdout, stdin=None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]), **env)
    return subprocess.run([sys.executable, *args], stdout=stdout, stderr=subprocess.PIPE, stdin=stdin, env=full,
                          timeout=300)


@pytest.fixture(scope="module")
def env(tmp_path_factory, zig_cache) -> dict[str, str]:
    """A cache holding the vector add of the examples, built once."""
    env = cache_env(tmp_path_factory.mktemp("streams") / "cache", zig_cache)
    proc = _run(["-m", "jitflow", "build", VECADD, "--target", "c", "-o",
                 str(tmp_path_factory.mktemp("first") / "vecadd.so")], env, subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    return env


def _check_library(path: Path) -> None:
    lib = jitflow.load(path)
    a, b = np.arange(1024, dtype="float32"), np.full(1024, 2, "float32")
    out = np.zeros(1024, "float32")
    import tvm

    ta, tb, tc = (tvm.runtime.tensor(x) for x in (a, b, out))
    lib["main"](ta, tb, tc)
    np.testing.assert_allclose(tc.numpy(), a + b)


def test_a_link_to_standard_output_is_written_through_not_replaced(env, tmp_path):
    link = tmp_path / "out"
    link.symlink_to("/proc/self/fd/1")            # what /dev/stdout is
    bundle = tmp_path / "bundle.tar"
    with open(bundle, "wb") as out:
        proc = _run(["-m", "jitflow", "cache", "pack", str(link)], env, out)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert names[0] == "manifest.json" and any(n.endswith("/lib.so") for n in names), names
    assert b"packed 1 entry" in proc.stderr                      # what it says went to standard error


def test_pack_to_dev_stdout_through_a_pipe_unpacks_from_dev_stdin(env, tmp_path):
    packer = subprocess.Popen([sys.executable, "-m", "jitflow", "cache", "pack", "/dev/stdout"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, PYTHONPATH=str(ROOT), **env))
    other = dict(env, JITFLOW_CACHE_DIR=str(tmp_path / "other"))
    proc = _run(["-m", "jitflow", "cache", "unpack", "/dev/stdin"], other, subprocess.PIPE, stdin=packer.stdout)
    packer.stdout.close()
    assert packer.wait(timeout=300) == 0, packer.stderr.read()
    assert proc.returncode == 0 and b"installed 1 entry" in proc.stdout, proc.stderr


def test_build_and_export_library_to_dev_stdout_write_the_library_there(env, tmp_path):
    built = tmp_path / "built.so"
    with open(built, "wb") as out:
        proc = _run(["-m", "jitflow", "build", VECADD, "--target", "c", "-o", "/dev/stdout"], env, out)
    assert proc.returncode == 0, proc.stderr
    assert os.path.islink("/dev/stdout") and b"/dev/stdout: hit" in proc.stderr, proc.stderr
    _check_library(built)
    exported = tmp_path / "exported.so"
    code = ("import sys; sys.path.insert(0, %r); import vecadd_cpu, jitflow; "
            "sys.stdout.write('before '); sys.stdout.flush(); "
            "jitflow.compile(vecadd_cpu.vecadd, 'c').export_library('/dev/stdout')") % str(ROOT / "examples")
    with open(exported, "wb") as out:
        proc = _run(["-c", code], env, out)
    assert proc.returncode == 0, proc.stderr
    data = exported.read_bytes()
    assert data.startswith(b"before \x7fELF"), data[:16]        # after what was written, as `>>` would
    library = tmp_path / "library.so"
    library.write_bytes(data[len(b"before "):])
    _check_library(library)


def test_a_terminal_another_process_s_file_and_a_link_in_dev_are_refused(tmp_path):
    primary, secondary = pty.openpty()
    try:
        saved = os.dup(1)
        os.dup2(secondary, 1)
        try:
            with pytest.raises(InvalidInputError, match="is a terminal"):
                destination("/dev/stdout")
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    finally:
        os.close(primary)
        os.close(secondary)
    other = tmp_path / "other.so"
    other.symlink_to("/proc/1/fd/1")
    with pytest.raises(InvalidInputError, match="another process's open file"):
        destination(other)
    assert other.is_symlink()
    read, write = os.pipe()
    try:
        with pytest.raises(InvalidInputError, match="not open for writing"):
            destination(f"/proc/self/fd/{read}")
    finally:
        os.close(read)
        os.close(write)
