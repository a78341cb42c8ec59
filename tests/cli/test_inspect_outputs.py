"""What `jitflow inspect --html FILE` and `--timeline FILE` write, and where they refuse to: never over
the module file or a file it imports, never into a FIFO or a folder (refused at once, before
anything is built), always through a temporary file renamed into place; and the messages of
inspect that name the right cause (a truncated library, a C build's missing CUDA source)."""
from __future__ import annotations

import json
import os
import stat

import pytest
from cli_run import cache_env, jf, no_traceback
from conftest import module_cache

import jitflow
from jitflow.cli.main import main


@pytest.fixture(scope="module")
def setup(tmp_path_factory, zig_cache):
    """A module file (a C model, which has a plan to draw) importing a helper, its cache, its export."""
    folder = tmp_path_factory.mktemp("outputs")
    (folder / "outputs_helper.py").write_text("import models\n\ndef model():\n    return models.mlp(seed=31)\n")
    (folder / "m.py").write_text("import outputs_helper\n\nmod = outputs_helper.model()\n")
    with module_cache(tmp_path_factory, zig_cache) as cache:
        import models

        exe = jitflow.compile(models.mlp(seed=31), "c")
        exported = exe.export_library(folder / "mlp.so")
        kernel = jitflow.compile(__import__("kernels").axpb(906.0), "c")
        kernel.build()
        yield folder, cache_env(cache, zig_cache), exported, kernel.key


@pytest.fixture
def cli(setup, monkeypatch, capsys):
    """`jitflow ARGS` in this process, against the setup's cache: (exit status, stdout, stderr)."""
    for name, value in setup[1].items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _unchanged(folder, run):
    """Run `run()`; assert that no file of `folder` changed and no temporary file was left."""
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    result = run()
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert after == before
    return result


@pytest.mark.parametrize("args", [
    ["{m}:mod", "--html", "{m}"],
    ["{m}:mod", "--timeline", "{m}"],
    ["{m}:mod", "--html", "{helper}"],                      # a file the module imports
    ["--diff", "{m}:mod", "{m}:mod", "--html", "{m}"],
    ["{lib}", "--html", "{lib}"],                           # the library being inspected
])
def test_an_output_onto_an_input_is_refused_and_the_input_is_kept(setup, cli, args):
    folder, _, lib, _ = setup
    names = {"m": str(folder / "m.py"), "helper": str(folder / "outputs_helper.py"), "lib": str(lib)}
    argv = [a.format(**names) for a in args] + (["--target", "c"] if "{lib}" not in args else [])
    code, _, err = _unchanged(folder, lambda: cli("inspect", *argv))
    flag = "--html" if "--html" in argv else "--timeline"
    target = argv[argv.index(flag) + 1]
    assert code == 2 and f"inspect {flag}: {target} is an input of this build; writing" in err, err   # named once
    assert "Give another output name" in err


def test_an_output_onto_a_fifo_or_a_folder_is_refused_at_once(setup, cli, tmp_path):
    folder, env, _, _ = setup
    fifo, dest = tmp_path / "plan.fifo", tmp_path / "plans"
    os.mkfifo(fifo)
    dest.mkdir()
    spec = f"{folder}/m.py:mod"
    for flag in ("--html", "--timeline"):     # the FIFO used to block for ever, waiting for a reader: a process each
        proc = jf("inspect", spec, flag, str(fifo), "--target", "c", env=env)
        assert proc.returncode == 2 and f"inspect {flag}: {fifo} is a FIFO (named pipe)" in proc.stderr, proc.stderr
        code, _, err = cli("inspect", spec, flag, str(dest), "--target", "c")
        example = "plan.html" if flag == "--html" else "plan.json"
        assert code == 2 and f"inspect {flag}: {dest} is a directory" in err and f"such as {example} in it" in err, err
    proc = jf("inspect", "--diff", spec, spec, "--html", str(fifo), "--target", "c", env=env)
    assert proc.returncode == 2 and f"inspect --html: {fifo} is a FIFO" in proc.stderr and no_traceback(proc)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and list(dest.iterdir()) == []


def test_outputs_are_written_whole_through_a_rename_and_the_diff_is_printed(setup, cli, tmp_path):
    folder = setup[0]
    spec, page, events = f"{folder}/m.py:mod", tmp_path / "plan.html", tmp_path / "plan.json"
    page.write_text("an older page")
    old = os.stat(page).st_ino
    code, out, err = cli("inspect", spec, "--html", str(page), "--timeline", str(events), "--target", "c")
    assert code == 0 and out == "", err
    assert f"wrote {page} (the memory plan drawn)" in err and f"wrote {events}" in err
    assert page.read_text().lower().startswith("<!doctype html>") and os.stat(page).st_ino != old   # renamed in
    assert json.loads(events.read_text())["traceEvents"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.html", "plan.json"]        # no temporary left
    code, _, err = cli("inspect", spec, "--html", str(page), "--timeline", str(page), "--target", "c")
    assert code == 2 and "--timeline and --html both name" in err
    code, out, err = cli("inspect", "--diff", spec, spec, "--html", str(page), "--target", "c")
    assert code == 0 and out.startswith("---") and f"wrote {page}" in err      # the diff too, as docs/cli.md says


def test_inspect_of_a_truncated_library_says_truncated_as_load_does(setup, cli, tmp_path):
    cut = tmp_path / "cut.so"
    cut.write_bytes(setup[2].read_bytes()[:5000])
    code, _, err = cli("inspect", str(cut))
    assert code == 2 and f"{cut}: truncated: its headers need" in err and "not ELF" not in err, err
    with pytest.raises(jitflow.errors.LoadError, match="truncated: its headers need"):
        jitflow.load(cut)


def test_section_cuda_of_a_c_build_says_it_is_a_c_build(setup, cli):
    _, _, lib, key = setup
    code, _, err = cli("inspect", key[:12], "--section", "cuda")
    assert code == 2 and "this build has no CUDA source: its target is 'c'" in err, err
    assert "without its sources" not in err
    code, _, err = cli("inspect", str(lib), "--section", "cuda")
    assert code == 2 and "a library does not carry it" in err
