"""build and inspect through the real CLI: shared build options, FILE.py:NAME, exit codes, messages
in command-line words, no traceback for bad input or a closed pipe."""
from __future__ import annotations

import _ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest
from cli_run import cache_env, jf, jf_process, no_traceback
from conftest import ROOT, _gpu_present

MODEL = '''
    import jitflow, kernels

    chain = kernels.chain()
    Module = kernels.axpb(901.0)
    exe = jitflow.compile(kernels.axpb(902.0), "c")
    reuse = jitflow.compile(chain, "c")
    no_reuse = jitflow.compile(chain, "c", pass_config={"tirx.disable_storage_rewrite": True})

    def make():
        return kernels.axpb(903.0)

    def needs(n):
        return kernels.axpb(n)

    def broken():
        return {}["missing"]
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory, zig_cache):
    """(env, model file) with a private cache for this module."""
    folder = tmp_path_factory.mktemp("cli-build")
    model = folder / "model.py"
    model.write_text(textwrap.dedent(MODEL))
    return cache_env(folder / "cache", zig_cache), model


def test_build_takes_the_build_options_of_inspect(setup, tmp_path):
    env, model = setup
    plain = jf_process("build", f"{model}:chain", "--target", "c", "-o", str(tmp_path / "a.so"), env=env)
    assert plain.returncode == 0, plain.stderr
    configured = jf("build", f"{model}:chain", "--target", "c", "--pass-config", "tirx.disable_storage_rewrite=true",
                    "-o", str(tmp_path / "b.so"), env=env)
    assert configured.returncode == 0, configured.stderr
    assert configured.stdout.split()[2] != plain.stdout.split()[2]       # another key: the option reached TVM
    assert (tmp_path / "b.so").is_file()
    bad = jf("build", f"{model}:chain", "--target", "c", "--pass-config", "novalue", "-o", "x.so", env=env)
    assert bad.returncode == 2 and "--pass-config novalue: expected KEY=VALUE" in bad.stderr


@pytest.mark.parametrize("option, says", [
    ("tirx.disable_vectorise=true", "--pass-config: 'tirx.disable_vectorise' is not a TVM PassContext option; "
                                    "the nearest are tirx.disable_vectorize, "),
    ("tir.disable_storage_rewrite=true", "the nearest are tirx.disable_storage_rewrite, "),
    ("tirx.disable_vectorize=maybe", "--pass-config: TVM refuses the value: Expect config tirx.disable_vectorize "
                                     "to have type bool"),
])
def test_a_bad_pass_config_is_a_usage_error_naming_the_nearest_options(setup, tmp_path, option, says):
    env, model = setup
    out = jf("build", f"{model}:chain", "--target", "c", "--pass-config", option, "-o", str(tmp_path / "x.so"),
             env=env)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    if "nearest" in says:
        assert len(line.split("the nearest are ")[1].split(" (")[0].split(", ")) == 3      # three names, not 35
    assert not (tmp_path / "x.so").exists()


@pytest.mark.parametrize("name, options", [("exe", []), ("make", ["--target", "c"]), ("Module", ["--target", "c"])])
def test_build_accepts_an_executable_a_function_or_a_module(setup, tmp_path, name, options):
    env, model = setup
    out = jf("build", f"{model}:{name}", *options, "-o", str(tmp_path / "k.so"), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{tmp_path / 'k.so'}: ") and (tmp_path / "k.so").is_file()


def test_build_refuses_build_options_with_an_executable(setup):
    env, model = setup
    out = jf("build", f"{model}:exe", "--arch", "sm_90", "--no-cache", "-o", "k.so", env=env)
    assert out.returncode == 2 and "is a jitflow Executable" in out.stderr
    assert "leave out --arch or" in out.stderr          # --no-cache says where it is kept, not how it is built


def _entries(cache):
    return sorted(p.name for p in (cache / "v1" / "entries").glob("*/*")) if cache.is_dir() else []


@pytest.mark.parametrize("name, options", [("Module", ["--target", "c"]), ("exe", [])])
def test_no_cache_builds_a_file_spec_without_a_cache_entry(setup, tmp_path, name, options):
    env, model = setup
    cache = tmp_path / "cache"
    env = dict(env, JITFLOW_CACHE_DIR=str(cache))
    for command in (["build", f"{model}:{name}", *options, "--no-cache", "-o", str(tmp_path / "k.so")],
                    ["inspect", f"{model}:{name}", *options, "--no-cache", "--section", "kernels"]):
        out = jf(*command, env=env)
        assert out.returncode == 0, out.stderr
        assert _entries(cache) == []                    # built, and nothing was stored
    assert (tmp_path / "k.so").read_bytes()[:4] == b"\x7fELF"
    kept = jf("build", f"{model}:{name}", *options, "--cache-dir", str(tmp_path / "other"), "-o",
              str(tmp_path / "k2.so"), env=env)
    assert kept.returncode == 0, kept.stderr
    assert _entries(cache) == [] and len(_entries(tmp_path / "other")) == 1       # where --cache-dir says


@pytest.mark.parametrize("name", ["k.tar", "k.tar.gz", "k.o", "libk.a", "k.zip"])
def test_build_refuses_an_output_name_of_another_format(setup, tmp_path, name):
    env, model = setup
    out = jf("build", f"{model}:Module", "--target", "c", "-o", str(tmp_path / name), env=env)
    assert out.returncode == 2 and no_traceback(out), out.stderr
    assert f"-o: {name} ends in ." in out.stderr and "name it with .so" in out.stderr
    assert not (tmp_path / name).exists()


def test_build_does_not_run_an_example_main(setup, tmp_path):
    env, _ = setup
    out = jf("build", f"{ROOT / 'examples' / 'vecadd_cpu.py'}:main", "--target", "c", "-o", str(tmp_path / "m.so"),
             env=env)
    assert out.returncode == 2 and no_traceback(out)
    assert "main() returns None (so it was not called)" in out.stderr and out.stdout == ""
    assert not (tmp_path / "m.so").exists()


@pytest.mark.parametrize("name, says", [
    ("needs", "needs() needs arguments (n)"),
    ("broken", "calling broken() raised KeyError: 'missing'"),
    ("Nope", "has no 'Nope'"),
])
def test_bad_file_py_name_is_a_usage_error_without_jitflows_traceback(setup, name, says):
    env, model = setup
    out = jf("build", f"{model}:{name}", "--target", "c", "-o", "x.so", env=env)
    assert out.returncode == 2 and says in out.stderr and no_traceback(out)
    if name == "broken":   # the user's own line is shown, jitflow's frames are not
        assert f'File "{model}", line' in out.stderr and "jitflow/cli" not in out.stderr


def test_messages_speak_command_line(setup):
    env, model = setup
    out = jf("build", f"{model}:Module", "--target", "c", "--arch", "sm_90", "-o", "x.so", env=env)
    assert out.returncode == 2 and "--arch applies to --target cuda only" in out.stderr and "arch=" not in out.stderr
    empty = jf("inspect", f"{model}:Module", "--arch", ",", env=env)
    assert empty.returncode == 2 and "--arch is empty" in empty.stderr
    report = jf_process("inspect", f"{model}:Module", "--target", "c", env=env)
    assert report.returncode == 0, report.stderr
    assert "sources: --section host (" in report.stdout and "rep." not in report.stdout


def test_build_and_inspect_take_a_cpu_level(setup, tmp_path):
    env, model = setup
    built = jf("build", f"{model}:Module", "--target", "c", "--cpu-level", "x86-64-v2", "-o", str(tmp_path / "v2.so"),
               env=env)
    assert built.returncode == 0 and built.stdout.strip().endswith("; CPU level x86-64-v2"), built.stderr
    shown = jf("inspect", str(tmp_path / "v2.so"), env=env)
    assert shown.returncode == 0 and "cpu level: x86-64-v2; needs cx16, lahf_lm, pni, popcnt" in shown.stdout
    bad = jf("build", f"{model}:Module", "--target", "c", "--cpu-level", "x86-64-v9", "-o", "x.so", env=env)
    assert bad.returncode == 2 and "--cpu-level='x86-64-v9' is not a CPU level; for x86-64 hosts: x86-64 (the " \
                                   "default: any x86_64 CPU), x86-64-v2, x86-64-v3, x86-64-v4, native" in bad.stderr
    other = jf("build", f"{model}:Module", "--target", "c", "--cpu-level", "neoverse-v2", "-o", "x.so", env=env)
    assert other.returncode == 2 and "'neoverse-v2' is for aarch64-linux-gnu hosts" in other.stderr
    assert no_traceback(bad) and no_traceback(other)


@pytest.mark.skipif(_gpu_present(), reason="a visible GPU gives the default arch")
def test_cuda_without_arch_says_the_option(setup):
    env, model = setup
    out = jf("inspect", f"{model}:Module", env=env)
    assert out.returncode == 2 and "no --arch given" in out.stderr and "pass --arch sm_90" in out.stderr
    assert "no --target given, so the target is cuda (the default)" in out.stderr
    assert "or --target c to build for the CPU" in out.stderr
    built = jf("build", f"{model}:Module", "-o", "x.so", env=env)
    assert built.returncode == 2 and "--target c to build for the CPU" in built.stderr and no_traceback(built)
    named = jf("build", f"{model}:Module", "--target", "cuda", "-o", "x.so", env=env)
    assert named.returncode == 2 and "no --arch given" in named.stderr and "default" not in named.stderr


def test_exit_codes_of_inspect_diff_follow_diff(setup):
    env, model = setup
    same = jf("inspect", "--diff", f"{model}:reuse", f"{model}:reuse", env=env)
    assert same.returncode == 0, same.stderr
    assert "no difference" in same.stdout
    differs = jf("inspect", "--diff", f"{model}:reuse", f"{model}:no_reuse", "--json", env=env)
    assert differs.returncode == 1, differs.stderr
    assert json.loads(differs.stdout)["changed"] is True
    failed = jf("inspect", "--diff", f"{model}:reuse", f"{model}:Nope", env=env)
    assert failed.returncode == 2 and "has no 'Nope'" in failed.stderr      # trouble is never 1


def test_exit_codes_for_usage_input_and_build_failures(setup):
    env, model = setup
    usage = jf_process("inspect", "--no-such-option", env=env)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    nothing = jf("inspect", "nothing-here", env=env)
    assert nothing.returncode == 2 and "expected FILE.py:NAME" in nothing.stderr
    unscheduled = jf("build", f"{model}:Module", "--arch", "sm_90", "-o", "x.so", env=env)   # loops not bound
    assert unscheduled.returncode == 3 and "not bound to GPU threads" in unscheduled.stderr
    assert no_traceback(unscheduled)


def test_inspect_refuses_a_library_not_built_by_tvm(setup):
    env, model = setup
    other = jf("inspect", _ctypes.__file__, env=env)   # a shared library, but not TVM's
    assert other.returncode == 2 and no_traceback(other)
    assert "is not a library built by jitflow or TVM" in other.stderr and other.stdout == ""
    text = jf("inspect", str(model), env=env)
    assert text.returncode == 2 and "is not a shared library" in text.stderr


def test_a_closed_pipe_is_not_a_traceback(setup):
    env, model = setup
    full = dict(os.environ, PYTHONPATH=f"{ROOT / 'tests'}{os.pathsep}{ROOT}", **env)
    proc = subprocess.Popen([sys.executable, "-m", "jitflow", "inspect", f"{model}:Module", "--target", "c",
                             "--section", "host"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
    proc.stdout.close()           # the reader is gone before anything is written (as `| head` would be)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and err == ""


def test_build_refuses_to_write_over_its_own_inputs(setup, tmp_path):
    env = setup[0]
    helper, model = tmp_path / "helper.py", tmp_path / "model.py"
    helper.write_text("import kernels\n\ndef make():\n    return kernels.axpb(904.0)\n")
    model.write_text("from helper import make\n")      # and the module it imports is an input too
    os.link(model, tmp_path / "hard.py")
    sources = {p: p.read_bytes() for p in (helper, model)}
    said = {model: "is an input of this build; writing", helper: "is an input of this build; writing",
            tmp_path / "hard.py": f"is an input of this build (the same file as {model}); writing"}
    for out, says in said.items():     # the file, what it imports (each named once), another name of the file
        proc = jf("build", f"{model}:make", "--target", "c", "-o", str(out), env=env)
        assert proc.returncode == 2 and no_traceback(proc), proc.stderr
        assert f"export_library: {out} {says}" in proc.stderr and "Give another output name" in proc.stderr
    assert {p: p.read_bytes() for p in sources} == sources


def test_cache_ls_tells_entries_apart_by_spec_options_and_cpu_level(setup, tmp_path):
    env, model = setup
    cache = tmp_path / "own"
    for spec, extra in ((f"{model}:reuse", []), (f"{model}:no_reuse", []),
                        (f"{model}:Module", ["--target", "c", "--cpu-level", "x86-64-v3"])):
        built = jf("build", spec, *extra, "--cache-dir", str(cache), "-o", str(tmp_path / "x.so"), env=env)
        assert built.returncode == 0, built.stderr
    listed = jf("cache", "ls", "--cache-dir", str(cache), env=env)
    header, *rows = listed.stdout.splitlines()
    assert header.split()[-1] == "options" and len(rows) == 3
    by_module = {row.split()[1]: row for row in rows}
    assert set(by_module) == {f"{model}:reuse", f"{model}:no_reuse", f"{model}:Module"}   # Executables by spec
    assert by_module[f"{model}:no_reuse"].endswith("  tirx.disable_storage_rewrite=true")
    assert by_module[f"{model}:reuse"].endswith("  -")
    assert f" c x86-64-v3  {_host()}" in by_module[f"{model}:Module"]
    shown = json.loads(jf("cache", "ls", "--json", "--cache-dir", str(cache), env=env).stdout)
    entries = {e["name"]: e for e in shown["entries"]}
    assert entries[f"{model}:no_reuse"]["options"] == ["tirx.disable_storage_rewrite=true"]
    assert entries[f"{model}:reuse"]["options"] == [] and entries[f"{model}:reuse"]["cpu_level"] is None
    level = entries[f"{model}:Module"]
    assert (level["cpu_level"], level["target"], level["kind"]) == ("x86-64-v3", "c x86-64-v3", "c")


def _host() -> str:
    from jitflow.targets import machine_host

    return machine_host()


def test_inspect_says_what_a_source_that_names_nothing_lacks(setup, tmp_path):
    env, model = setup
    missing = jf("inspect", str(tmp_path / "foo.so"), env=env)
    assert missing.returncode == 2 and f"{tmp_path / 'foo.so'}: no such file" in missing.stderr
    cache = tmp_path / "own"
    built = jf("build", f"{model}:Module", "--target", "c", "--cache-dir", str(cache), "-o", str(tmp_path / "m.so"),
               env=env)
    key = built.stdout.split()[2]
    other = next(c for c in "0123456789abcdef" if c != key[0])
    absent = jf("inspect", other * 4, "--cache-dir", str(cache), env=env)
    assert absent.returncode == 2 and f"no cache entry starts with {other * 4}" in absent.stderr
    short = jf("inspect", key[:4], "--cache-dir", str(cache), env=env)
    assert short.returncode == 2 and f"needs 6 or more hex digits; 1 entry starts with {key[:4]}" in short.stderr
    for source in (str(tmp_path / "m.so"), key[:8]):       # built already: build options are refused
        refused = jf("inspect", source, "--arch", "sm_90", "--cache-dir", str(cache), env=env)
        assert refused.returncode == 2 and f"{source} is built already: --arch says how to build" in refused.stderr
        assert no_traceback(refused)
    shown = jf("inspect", key[:8], "--cache-dir", str(cache), env=env)
    assert shown.returncode == 0, shown.stderr
