"""A CUDA library that cuda-python cannot find (libnvfatbin or libnvrtc: seen with another package's
CUDA wheels first on the path) is a ToolMissingError naming the wheel to install, before any
compiling; `jitflow doctor` fails its check with the same fix. The library is hidden from
cuda.pathfinder in a fresh interpreter: the bindings then raise its real DynamicLibNotFoundError."""
from __future__ import annotations

import json

import pytest
from conftest import run_python

HIDE = """
    import cuda.pathfinder as pathfinder
    found = pathfinder.load_nvidia_dynamic_lib
    def hidden(name):
        if name == {name!r}:
            raise pathfinder.DynamicLibNotFoundError('Failure finding "lib{name}.so": not in any wheel (test)')
        return found(name)
    pathfinder.load_nvidia_dynamic_lib = hidden
"""
BUILD = """
    import json, time, jitflow, kernels
    from jitflow.errors import ToolMissingError
    from jitflow.toolchain.cuda import nvrtc
    compiled = []
    real = nvrtc._compile_one
    nvrtc._compile_one = lambda *a, **k: compiled.append(1) or real(*a, **k)
    try:
        jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", cache=False).build()
        print(json.dumps(["built"]))
    except ToolMissingError as exc:
        print(json.dumps([type(exc).__name__, str(exc), len(compiled)]))
"""
DOCTOR = """
    import contextlib, io, json
    from jitflow.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["doctor", "--json"])
    checks = {{c["name"]: c for c in json.loads(out.getvalue())["checks"]}}
    print(json.dumps([code, checks.get({check!r}), checks.get("NVRTC", {{}}).get("ok")]))
"""


@pytest.mark.parametrize("name, check, wheel", [("nvfatbin", "nvfatbin", "nvidia-nvfatbin"),
                                                ("nvrtc", "NVRTC", "nvidia-cuda-nvrtc")])
def test_a_cuda_library_cuda_python_cannot_find_names_the_wheel(cache_dir, name, check, wheel):
    hide = HIDE.format(name=name)
    kind, text, compiled = json.loads(run_python(hide + BUILD).stdout.splitlines()[-1])
    assert kind == "ToolMissingError" and "cannot be loaded (Failure finding" in text, text
    assert f"pip install '{wheel}>=13,<14'" in text and "jitflow[cuda]" in text
    assert compiled == 0                                  # said before NVRTC compiles anything
    code, found, nvrtc_ok = json.loads(run_python(hide + DOCTOR.format(check=check)).stdout.splitlines()[-1])
    assert code == 1 and found["ok"] is False and wheel in found["fix"], found
    assert nvrtc_ok is (name != "nvrtc")                  # the other library's check stands on its own
