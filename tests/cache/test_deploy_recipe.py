"""The container recipe of docs/deploy.md, run as it is written there: its ```dockerfile block is
parsed, and its instructions run on this machine in a private mount namespace where /opt and /tmp are
fresh, empty folders (as in a slim image: /opt/app does not exist). `RUN` runs its command word for
word as root, one process each, under the umask a container build has (022); `COPY` copies a bundle
made here to its destination; `ENV` sets the serving process's environment. Two `RUN` lines are not
run, as they would change this machine: `pip install` (this checkout's environment stands for it,
its `jitflow` command first on PATH) and `useradd` (the machine's user `nobody` stands for the user
it adds, and `USER` runs as nobody: tests/other_user.py).

Then, as nobody, a fresh process serves read-only: every entry a hit with the right numbers. Then
the same `COPY` and `RUN` instructions install a second bundle into the same cache (as a later image
layer would), and nobody serves both bundles' entries.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import kernels
import pytest
from conftest import ROOT, module_cache
from other_user import other_user

import jitflow

DOC = ROOT / "docs" / "deploy.md"
#: the kernels of the two bundles: axpb's scales
FIRST, SECOND = (41.0, 43.0), (42.0,)


def dockerfile(text: str) -> list[tuple[str, str]]:
    """The instructions of the one whole image of `text` (its ```dockerfile block starting with FROM): (INSTRUCTION, arguments), a line
    ending in a backslash joined with the next as Docker joins them; comment lines left out."""
    blocks = [b for b in re.findall(r"```dockerfile\n(.*?)```", text, re.S) if b.startswith("FROM ")]
    assert len(blocks) == 1, "docs/deploy.md must hold exactly one whole image (a ```dockerfile block from FROM)"
    joined = re.sub(r"\\\n", "", blocks[0])
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


#: runs as root inside `unshare --mount --propagation private`: fresh /opt and /tmp, the folders the
#: test needs under the old /tmp bound again where they were, then each step in a process of its own
DRIVER = r"""
import ctypes, json, os, stat, subprocess, sys
spec = json.load(sys.stdin)
libc = ctypes.CDLL(None, use_errno=True)

def mount(source, target, fstype, flags, data):
    if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                  data.encode() if data else None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target}")

copies = {s["src"]: open(s["src"], "rb").read() for s in spec["steps"] if s["kind"] == "copy"}
kept = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in spec["keep"]]
mount("tmpfs", "/opt", "tmpfs", 0, "mode=0755,size=256m")
mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777,size=256m")
for path, fd in kept:
    os.makedirs(path, mode=0o755, exist_ok=True)
    mount(f"/proc/self/fd/{fd}", path, None, 4096 | 16384, None)       # MS_BIND | MS_REC
os.umask(0o022)
results = []
for step in spec["steps"]:
    if step["kind"] == "copy":
        with open(step["dest"], "wb") as f:
            f.write(copies[step["src"]])
        results.append({"step": step, "rc": 0})
    elif step["kind"] == "stat":
        found = {}
        for path in step["paths"]:
            try:
                st = os.lstat(path)
                found[path] = [stat.S_IMODE(st.st_mode), st.st_uid]
            except OSError:
                found[path] = None
        results.append({"step": step, "rc": 0, "stat": found})
    else:
        proc = subprocess.run(step["argv"], env=step["env"], cwd=step.get("cwd", "/"), capture_output=True,
                              text=True, timeout=300)
        results.append({"step": step, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr})
        if proc.returncode:
            break
print(json.dumps(results))
"""

#: what the service does, as nobody: each kernel of `scales`, its outcome and whether its numbers are right
SERVE = """
    import json, sys
    import numpy as np, tvm, jitflow, kernels
    from jitflow.errors import CacheMissError
    a = np.linspace(-2, 2, 64, dtype="float32")
    got = {}
    for scale in json.loads(sys.argv[1]):
        exe = jitflow.compile(kernels.axpb(scale), "c")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        try:
            exe["main"](tvm.runtime.tensor(a), c)
            got[str(scale)] = [exe.build_info.outcome, bool(np.allclose(c.numpy(), a * scale + 1, rtol=1e-6))]
        except CacheMissError as exc:
            got[str(scale)] = ["miss", str(exc)]
    print(json.dumps(got))
"""


def _namespaces_work() -> str | None:
    """Why a private mount namespace with its own tmpfs cannot be had here, or None."""
    if os.getuid() != 0:
        return "the recipe runs its RUN steps as root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if not os.path.isdir("/opt"):
        return "this machine has no /opt to mount a fresh folder over"
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs",
                           "/opt"], capture_output=True, text=True)
    return None if proc.returncode == 0 else f"private mount namespaces are not allowed: {proc.stderr.strip()}"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, zig_cache):
    """Two bundles made where building is allowed: FIRST's kernels, then SECOND's."""
    out = tmp_path_factory.mktemp("recipe")
    with module_cache(tmp_path_factory, zig_cache, "recipe-ci"):
        made = []
        for name, scales in (("first", FIRST), ("second", SECOND)):
            keys = [jitflow.compile(kernels.axpb(s), "c").build().key for s in scales]
            made.append(jitflow.cache.pack(out / f"{name}.tar", keys=keys).path)
    return made


def _serve_step(user, env: dict[str, str], scales: tuple[float, ...]) -> dict:
    code = textwrap.dedent(SERVE)
    full = user.env(HOME="/nonexistent", TMPDIR="/tmp", JITFLOW_ZIG_CACHE_DIR="/tmp/zig-never", JITFLOW_RECORD="",
                    **env)
    full = {k: v for k, v in full.items() if not k.startswith("JITFLOW_") or k in env or k in (
        "JITFLOW_ZIG_CACHE_DIR", "JITFLOW_RECORD")}
    return {"kind": "serve", "argv": user.command("-c", code, json.dumps(scales)), "env": full, "cwd": "/tmp"}


def test_the_dockerfile_of_the_docs_serves_as_written(bundles):
    why = _namespaces_work()
    if why:
        pytest.skip(why)
    user = other_user()
    bindir = Path(sys.executable).parent
    if not (bindir / "jitflow").exists():
        pytest.skip(f"no `jitflow` command beside {sys.executable} (install the checkout: "
                    "make .venv/.jitflow-installed)")
    root_env = {k: v for k, v in os.environ.items() if not k.startswith("JITFLOW_")}
    root_env.update(PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", HOME="/root", TMPDIR="/tmp")

    instructions = dockerfile(DOC.read_text())
    served_env: dict[str, str] = {}
    install: list[dict] = []      # COPY and RUN, as root: what a second bundle repeats
    serving_user, added = None, None
    skipped = []
    for word, rest in instructions:
        if word == "RUN" and re.match(r"(python3? -m )?pip install ", rest):
            skipped.append(rest)                  # the checkout's environment stands for it
        elif word == "RUN" and rest.startswith("useradd "):
            added = shlex.split(rest)[-1]         # nobody stands for the user it adds
        elif word == "RUN":
            install.append({"kind": "run", "argv": ["sh", "-c", rest], "env": root_env})
        elif word == "COPY":
            source, dest = shlex.split(rest)
            assert source.endswith(".tar"), f"the test copies a bundle only, not {source}"
            install.append({"kind": "copy", "dest": dest})
        elif word == "ENV":
            served_env.update(dict(item.split("=", 1) for item in shlex.split(rest)))
        elif word == "USER":
            serving_user = rest
        else:
            assert word == "FROM", f"the test does not know how to run {word} {rest}"
    assert skipped and install and served_env.get("JITFLOW_CACHE") == "readonly"
    assert serving_user == added and serving_user not in ("root", "0"), "the image serves as the user it adds"
    cache = served_env["JITFLOW_CACHE_DIR"]
    assert cache.startswith("/opt/"), "the recipe's cache is where the test mounts a fresh folder: /opt"

    steps = []
    for bundle, scales in ((bundles[0], FIRST), (bundles[1], FIRST + SECOND)):
        steps += [dict(step, src=str(bundle)) if step["kind"] == "copy" else step for step in install]
        steps.append({"kind": "stat", "paths": ["/opt/app", cache, f"{cache}/v1", f"{cache}/v1/entries"]})
        steps.append(_serve_step(user, served_env, scales))
    keep = sorted({str(p) for p in (ROOT, user.root) if str(p).startswith("/tmp/")})
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", DRIVER],
                          input=json.dumps({"steps": steps, "keep": keep}), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    failed = [r for r in results if r["rc"]]
    assert not failed, f"{failed[0]['step'].get('argv')}:\n{failed[0]['stdout']}{failed[0]['stderr']}"
    assert len(results) == len(steps)
    served = [json.loads(r["stdout"].splitlines()[-1]) for r in results if r["step"]["kind"] == "serve"]
    assert served[0] == {str(s): ["hit", True] for s in FIRST}, served[0]
    assert served[1] == {str(s): ["hit", True] for s in FIRST + SECOND}, served[1]
    stats = [r["stat"] for r in results if r["step"]["kind"] == "stat"]
    for found in stats:
        assert found["/opt/app"] == [0o755, 0] and found[cache] == [0o755, 0]      # as `mkdir -p` makes them
