"""The README's and docs/'s examples that are marked runnable on the CPU run, and print what the
docs show.

The convention, for whoever writes docs:

- Put the HTML comment `<!-- runnable -->` on the line just before a fenced block (it does not show
  when the Markdown is rendered). Mark every example that runs on a fresh install (`pip install -e
  '.[cuda]'`), on a machine without a GPU, in a few seconds. Every other fenced block says why it
  does not run here, in the comment before it: `<!-- not runnable: needs a GPU -->` (a block of
  what a runnable block prints needs none). A block with neither fails the test.
- A ```python block is run as a script (a file in that folder; one whose first line is `# NAME.py`
  is written as NAME.py too, for the commands after it). The blocks of one document share one
  namespace, as a reader running them in turn would (a block may use what an earlier one made).
  The output it shows is checked: a ```text block that comes
  next (only blank lines between), which must be the whole of what it prints, or `# prints TEXT`
  comments, one per printed line, in order.
- Any other block is a shell session: each line starting with `$ ` is a command, and the lines up to
  the next command are what it prints (standard output and error together).
- In what a block shows, `...` on a line of its own stands for any number of lines and `...` within
  a line for any text; a cache key (12 hex digits) matches any key (keys change with each jitflow
  version), a time (`190.8 ms`, `0.1 s`) any time, and a size (`26.7 KiB`) any size. The folder an example runs in is shown as /tmp.

The runnable blocks of one document run in order in one fresh folder (a file one writes, the next
can use) with `examples/` linked into it, a private JITFLOW_CACHE_DIR, and `jitflow` on PATH; its
Python blocks run in one process (doc_runner.py), so that TVM is imported once per document.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

MARK = "<!-- runnable -->"
NOT_RUN = re.compile(r"<!-- not runnable: \S.* -->")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KEY = re.compile(r"\b[0-9a-f]{12}\b")
TIME = re.compile(r"\b\d+(\.\d+)? (ms|s)\b")
SIZE = re.compile(r"\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b")


class Block:
    """One runnable fenced block: where it is, its language, its text and the output it shows."""

    def __init__(self, doc: Path, line: int, lang: str, text: str, shown: str | None) -> None:
        self.doc, self.line, self.lang, self.text, self.shown = doc, line, lang, text, shown

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def _fence_at(lines: list[str], i: int) -> tuple[str, str, int] | None:
    """(info string, body, index after the closing fence) of a fenced block opening at line i."""
    if not lines[i].startswith("```"):
        return None
    end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
    assert end is not None, f"unclosed fence at line {i + 1}"
    return lines[i][3:].strip(), "\n".join(lines[i + 1:end]) + "\n", end + 1


def blocks_of(doc: Path) -> list[Block]:
    lines = doc.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        fence = _fence_at(lines, i + 1)
        assert fence is not None, f"{doc.name}:{i + 1}: {MARK} is not followed by a fenced block"
        lang, body, after = fence
        shown = None
        while after < len(lines) and not lines[after].strip():
            after += 1
        following = _fence_at(lines, after) if after < len(lines) else None
        if lang == "python" and following is not None and following[0] == "text":
            shown = following[1]
        elif lang == "python" and "# prints " in body:
            shown = "".join(m + "\n" for m in re.findall(r"# prints (.*)$", body, re.M))
        found.append(Block(doc, i + 2, lang, body, shown))
    return found


BLOCKS = [b for doc in DOCS for b in blocks_of(doc)]
RUN = [doc for doc in DOCS if any(b.doc == doc for b in BLOCKS)]


def unmarked(doc: Path) -> list[int]:
    """Lines of fenced blocks that are neither marked runnable, nor say why not, nor show what a
    runnable block prints."""
    lines = doc.read_text().splitlines()
    shown = {b.line + len(b.text.splitlines()) for b in blocks_of(doc) if b.shown is not None}   # closing fences
    found, i = [], 0
    while i < len(lines):
        fence = _fence_at(lines, i)
        if fence is None:
            i += 1
            continue
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        if before != MARK and not NOT_RUN.fullmatch(before) and not _is_output(lines, i, shown):
            found.append(i + 1)
        i = fence[2]
    return found


def _is_output(lines: list[str], i: int, ends: set[int]) -> bool:
    """Whether the fence at line i is the ```text block right after a runnable block (its output)."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return lines[i].startswith("```text") and j in ends


def _normalize(text: str, folder: Path) -> str:
    return SIZE.sub("<size>", TIME.sub("<time>", KEY.sub("<key>", text.replace(str(folder), "/tmp"))))


def _line_matches(shown: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, actual) is not None


def matches(shown: list[str], actual: list[str]) -> bool:
    """Whether `actual` lines are what `shown` shows (`...` lines: any number of lines)."""
    if not shown:
        return not actual
    if shown[0].strip() == "...":
        return any(matches(shown[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and _line_matches(shown[0], actual[0]) and matches(shown[1:], actual[1:])


def _session(text: str) -> list[tuple[str, str]]:
    """(command, what it shows) for each `$ ` line of a shell block."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return [(cmd, "\n".join(out)) for cmd, out in steps]


@pytest.fixture(scope="module")
def folders(tmp_path_factory, zig_cache):
    """doc -> (its folder, the environment its examples run in), made on first use."""
    made: dict[Path, tuple[Path, dict[str, str]]] = {}

    def get(doc: Path) -> tuple[Path, dict[str, str]]:
        if doc not in made:
            folder = tmp_path_factory.mktemp(doc.stem)
            (folder / "examples").symlink_to(ROOT / "examples")
            bin_dir = tmp_path_factory.mktemp("bin")
            (bin_dir / "jitflow").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m jitflow "$@"\n')
            (bin_dir / "jitflow").chmod(0o755)
            env = dict(os.environ, PYTHONPATH=str(ROOT), JITFLOW_CACHE_DIR=str(folder / ".cache"),
                       JITFLOW_ZIG_CACHE_DIR=str(zig_cache), JITFLOW_CACHE="1", JITFLOW_PROGRESS="off",
                       PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
            for name in [n for n in env if n.startswith("JITFLOW_") and n not in
                         ("JITFLOW_CACHE_DIR", "JITFLOW_ZIG_CACHE_DIR", "JITFLOW_CACHE", "JITFLOW_PROGRESS")]:
                del env[name]      # the examples show what the defaults do
            made[doc] = folder, env
        return made[doc]

    return get


def test_some_examples_are_marked():
    assert any(b.doc.name == "README.md" for b in BLOCKS) and any(b.lang != "python" for b in BLOCKS)


def test_the_matching_can_fail():
    assert matches(["built <key> in <time>", "..."], ["built <key> in <time>", "a", "b"])
    assert not matches(["built <key> in <time>"], ["hit <key> in <time>"])
    assert not matches(["a", "...", "c"], ["a", "b"])


def test_every_block_is_marked_runnable_or_says_why_not():
    assert {doc.relative_to(ROOT).as_posix(): unmarked(doc) for doc in DOCS if unmarked(doc)} == {}


def test_the_marks_are_read():
    assert not NOT_RUN.fullmatch("<!-- not runnable:  -->") and NOT_RUN.fullmatch("<!-- not runnable: a GPU -->")
    assert unmarked(ROOT / "README.md") == [] and any(b.lang == "python" for b in blocks_of(ROOT / "README.md"))


class _Runner:
    """One Python process running a document's Python blocks in turn (doc_runner.py)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("doc_runner.py"))], cwd=folder,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def run(self, script: Path) -> dict:
        self.proc.stdin.write(f"{script}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the example runner died running {script.name}:\n{self.proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _python_block(block: Block, folder: Path, runner: _Runner) -> str | None:
    """Run a Python block; why it fails, or None."""
    first = block.text.splitlines()[0] if block.text.strip() else ""
    named = re.fullmatch(r"# (\w+\.py)\b.*", first)
    if named:
        (folder / named.group(1)).write_text(block.text)
    script = folder / f"example_{block.line}.py"      # TVMScript reads the source of what it parses
    script.write_text(block.text)
    result = runner.run(script)
    if not result["ok"]:
        return f"{block.name} failed:\n{result['error'][-3000:]}"
    if block.shown is not None:
        got = _normalize(result["stdout"], folder).splitlines()
        if not matches(_normalize(block.shown, folder).splitlines(), got):
            return f"{block.name} prints:\n{result['stdout']}\nthe doc shows:\n{block.shown}"
    return None


def _shell_block(block: Block, folder: Path, env: dict[str, str]) -> str | None:
    """Run a shell session's commands; why one prints other than the doc shows, or None."""
    steps = _session(block.text)
    if not steps:
        return f"{block.name}: a shell block without a `$ ` command"
    for command, shown in steps:
        proc = subprocess.run(command, shell=True, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=180)
        got = _normalize(proc.stdout + proc.stderr, folder).splitlines()
        if not matches(_normalize(shown, folder).splitlines(), got):
            return f"{block.name}: `{command}` prints:\n{proc.stdout}{proc.stderr}\nthe doc shows:\n{shown}"
    return None


@pytest.mark.parametrize("doc", RUN, ids=[d.relative_to(ROOT).as_posix() for d in RUN])
def test_doc_examples(doc, folders):
    folder, env = folders(doc)
    runner = _Runner(folder, env)
    failed = []
    try:
        for block in [b for b in BLOCKS if b.doc == doc]:
            why = _python_block(block, folder, runner) if block.lang == "python" else _shell_block(block, folder, env)
            if why is not None:
                failed.append(why)
    finally:
        runner.close()
    assert not failed, "\n\n".join(failed)


def sections(doc: Path) -> list[tuple[str, str]]:
    """(heading, text) of each section of a document (a heading inside a fenced block is code)."""
    found, heading, text, fenced = [], "", [], False
    for line in doc.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#{1,6} ", line):
            found.append((heading, "\n".join(text)))
            heading, text = line, []
        else:
            text.append(line)
    return found + [(heading, "\n".join(text))]


def test_where_a_key_is_shown_the_doc_says_keys_depend_on_the_installed_versions():
    """A reader's keys differ from those shown (they change with TVM, jitflow, zig, the CUDA compiler):
    each section that shows one says why."""
    showing = {(doc.name, heading) for doc in DOCS for heading, text in sections(doc) if KEY.search(text)}
    silent = {(doc.name, heading) for doc in DOCS for heading, text in sections(doc)
              if KEY.search(text) and "installed versions" not in " ".join(text.split())}
    assert ("README.md", "## Quickstart") in showing and silent == set()


#: what the README calls public besides what `jitflow` itself exports
PUBLIC_MODULES = ("errors", "report", "tracing", "meta_schedule", "cache.pack", "cache.unpack", "runtime.compat.SimulatedGpu",
                  "runtime.compat.check_library", "runtime.cpu_features.simulated")
#: jitflow.NAME as code names it (a schema such as jitflow.cache-ls/1 or a section .jitflow.digest is not code)
USE = re.compile(r"(?<![\w.])jitflow\.([A-Za-z_]+(?:\.[A-Za-z_]+)*)(?![\w/-])")


def _used(text: str) -> set[str]:
    return set(USE.findall(text))


def _bodies(lines: list[str]) -> list[str]:
    """The text of each fenced block, in order."""
    found, i = [], 0
    while i < len(lines):
        fence = _fence_at(lines, i)
        if fence is None:
            i += 1
        else:
            found.append(fence[1])
            i = fence[2]
    return found


def test_examples_and_docs_use_only_the_public_api():
    import jitflow

    texts = {p: p.read_text() for p in [*sorted((ROOT / "examples").glob("*.py")), *DOCS[1:]]}
    texts[ROOT / "README.md"] = "\n".join(_bodies((ROOT / "README.md").read_text().splitlines()))   # its code

    def public(name: str) -> bool:
        return name.split(".")[0] in jitflow.__all__ or any(
            name == m or name.startswith(m + ".") or m.startswith(name + ".") for m in PUBLIC_MODULES)
    internal = {p.relative_to(ROOT).as_posix(): sorted(n for n in _used(t) if not public(n)) for p, t in texts.items()}
    assert {k: v for k, v in internal.items() if v} == {}
    assert _used("jitflow.targets.visible_gpu_arch() `jitflow.cache-ls/1` .jitflow.digest") == {"targets.visible_gpu_arch"}


def test_examples_and_docs_build_for_c_not_llvm():
    # jitflow builds an llvm target as its C host and warns each process that does: its own
    # examples name "c" (MetaSchedule still tunes for llvm)
    llvm = re.compile(r"""jitflow\.compile\([^\n]*["']llvm""")
    files = [*sorted((ROOT / "examples").glob("*.py")), *DOCS, ROOT / "jitflow" / "meta_schedule" / "relax.py"]
    assert {p.name: llvm.search(p.read_text()).group(0) for p in files if llvm.search(p.read_text())} == {}
