"""A process that only loads libraries never imports the `tvm` package (nor TVM's compiler library):
jitflow.load and jitflow.load_vm go through tvm_ffi and TVM's runtime libraries. Each check runs in a
fresh interpreter; numpy arrays go in, numpy arrays (`.numpy()`) come out. Where `tvm` is imported,
TVM tensors work both ways."""
from __future__ import annotations

import json
import shutil
import sys

import kernels
import models
import numpy as np
import pytest
from conftest import ROOT, module_cache, run_python

import jitflow

sys.path.insert(0, str(ROOT / "benchmarks"))
import nn_models  # noqa: E402


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, zig_cache):
    """A kernel, a model and a model calling TVM's contrib top-k, exported; the top-k's input and answer."""
    folder = tmp_path_factory.mktemp("shipped")
    with module_cache(tmp_path_factory, zig_cache):
        jitflow.compile(kernels.axpb(3.0, n=64), "c").export_library(folder / "axpb.so")
        jitflow.compile(models.mlp(seed=21), "c").export_library(folder / "mlp.so")
        topk = nn_models.topk_head()
        jitflow.compile(topk.mod, "c").export_library(folder / "topk.so")
    x = topk.example_input(3)
    np.save(folder / "x.npy", x)
    (folder / "topk.json").write_text(json.dumps(nn_models.topk_reference(topk, x)[1].tolist()))
    return folder


#: loads and runs the three libraries; prints what it saw of tvm, TVM's compiler and the results
LOAD_AND_RUN = """
    import json, sys
    {prelude}
    import numpy as np, jitflow, models
    folder = {folder!r}
    a, out = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    jitflow.load(folder + "/axpb.so")["main"](a, out)
    np.testing.assert_allclose(out, a * 3.0 + 1)
    vm = jitflow.load_vm(folder + "/mlp.so", "cpu")
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    y = vm["main"](x).numpy()
    np.testing.assert_allclose(y, models.mlp_reference(x, models.mlp_weights(seed=21)), rtol=1e-5, atol=1e-5)
    values, indices = jitflow.load_vm(folder + "/topk.so")["forward"](np.load(folder + "/x.npy"))
    assert indices.numpy().tolist() == json.load(open(folder + "/topk.json"))
    maps = open("/proc/self/maps").read()
    print(json.dumps({{"tvm": sorted(m for m in sys.modules if m == "tvm" or m.startswith("tvm.")),
                      "compiler": "libtvm_compiler" in maps, "extra": "libtvm_runtime_extra" in maps,
                      "result": type(y).__name__}}))
"""


def _run(shipped, prelude: str = "", env: dict[str, str] | None = None) -> dict:
    proc = run_python(LOAD_AND_RUN.format(folder=str(shipped), prelude=prelude), env=env)
    return json.loads(proc.stdout.splitlines()[-1])


def test_tvm_library_path_is_searched_first_as_tvm_searches_it(shipped, tmp_path):
    from jitflow.runtime import tvm_runtime

    names = (tvm_runtime.RUNTIME, tvm_runtime.EXTRA)
    copies, empty = tmp_path / "tvm-libs", tmp_path / "no-libs"
    copies.mkdir()
    empty.mkdir()
    for name in names:
        shutil.copy2(tvm_runtime.lib_folder() / name, copies / name)
    # after the libraries ran: which TVM runtime libraries the process mapped
    prelude = ("import atexit; atexit.register(lambda: print(json.dumps(sorted("
               "{line.split()[-1] for line in open('/proc/self/maps') if 'libtvm_runtime' in line}))))")

    def mapped(folder) -> list[str]:
        proc = run_python(LOAD_AND_RUN.format(folder=str(shipped), prelude=prelude),
                          env={"TVM_LIBRARY_PATH": str(folder)})
        *_, seen, maps = proc.stdout.splitlines()
        assert json.loads(seen)["tvm"] == []
        return json.loads(maps)

    assert mapped(copies) == sorted(str(copies / name) for name in names)
    # a folder without them: the installed TVM's, as TVM does
    assert mapped(empty) == sorted(str(tvm_runtime.lib_folder() / name) for name in names)


def test_a_kernel_and_models_load_and_run_without_importing_tvm(shipped):
    seen = _run(shipped)
    assert seen == {"tvm": [], "compiler": False, "extra": True, "result": "ndarray"}


def test_they_load_and_run_where_importing_tvm_fails(shipped):
    seen = _run(shipped, prelude='sys.modules["tvm"] = None   # any import of tvm raises ImportError')
    assert seen["compiler"] is False and seen["extra"] is True


INTEROP = """
    import numpy as np, sys
    {first}
    import jitflow, models
    vm = jitflow.load_vm({path!r}, "cpu")
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    import tvm
    y = vm["main"](tvm.runtime.tensor(x))
    assert isinstance(y, tvm.runtime.Tensor), type(y)
    np.testing.assert_allclose(y.numpy(), models.mlp_reference(x, models.mlp_weights(seed=21)), rtol=1e-5, atol=1e-5)
    print("ok")
"""


@pytest.mark.parametrize("first", ["import tvm", ""], ids=["tvm-imported-first", "tvm-imported-after-loading"])
def test_tvm_tensors_go_in_and_come_out_where_tvm_is_imported(shipped, first):
    proc = run_python(INTEROP.format(first=first, path=str(shipped / "mlp.so")))
    assert proc.stdout.split() == ["ok"]


VM_API = """
    import sys
    import numpy as np, jitflow, models
    vm = jitflow.load_vm({path!r}, "cpu", memory_cfg="naive")
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    want = models.mlp_reference(x, models.mlp_weights(seed=21))
    vm.set_input("main", x)
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs("main").numpy(), want, rtol=1e-5, atol=1e-5)
    vm.save_function("main", "main_saved", x)
    np.testing.assert_allclose(vm["main_saved"]().numpy(), want, rtol=1e-5, atol=1e-5)
    timed = vm.time_evaluator("main", jitflow.runtime.tensors.device_of("cpu", False), number=2, repeat=3)(x)
    assert len(timed.results) == 3 and 0 < timed.min <= timed.median <= timed.max
    print("tvm" in sys.modules)
"""


def test_the_vm_keeps_tvms_stateful_and_timing_calls(shipped):
    assert run_python(VM_API.format(path=str(shipped / "mlp.so"))).stdout.split() == ["False"]


LOAD_PATH = """
    import dataclasses, json, sys
    import numpy as np, tvm_ffi
    import jitflow
    a, out = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    jitflow.load({path!r})["main"](a, out)
    import jitflow.runtime.compat   # what a CUDA library's load adds: its device code checked against the GPU
    mine = {{name: m for name, m in sys.modules.items() if name == "jitflow" or name.startswith("jitflow.")}}
    print(json.dumps({{"modules": sorted(mine), "dataclasses": sorted(
        f"{{name}}.{{k}}" for name, m in mine.items() for k, v in vars(m).items()
        if isinstance(v, type) and v.__module__ == name and dataclasses.is_dataclass(v))}}))
"""


def test_the_load_path_imports_no_build_side_and_defines_no_dataclass(shipped):
    """`import jitflow` + a load is paid at every service start: each frozen dataclass it defines costs
    some 0.3 ms, a NamedTuple a fifth of that, so the load path's records are NamedTuples."""
    seen = json.loads(run_python(LOAD_PATH.format(path=str(shipped / "axpb.so"))).stdout.splitlines()[-1])
    assert seen["dataclasses"] == []
    build_side = ("jitflow.builder", "jitflow.cache", "jitflow.toolchain", "jitflow.report", "jitflow.farm",
                  "jitflow.pipeline", "jitflow.executable", "jitflow.targets.spec", "jitflow.targets.cpu_level")
    assert [m for m in seen["modules"] if m.startswith(build_side)] == []
    assert {"jitflow.runtime.load", "jitflow.runtime.library_check", "jitflow.runtime.compat"} <= set(seen["modules"])


MISSING_FUNCTION = """
    import json, sys
    {first}
    import jitflow, tvm_ffi
    from jitflow.errors import FunctionNotFoundError
    seen = {{}}
    lib = jitflow.load({folder!r} + "/axpb.so")
    for what, get in (("load", lambda: lib["mian"]),
                      ("load_vm", lambda: jitflow.load_vm({folder!r} + "/mlp.so")["mian"]),
                      ("load of a model", lambda: jitflow.load({folder!r} + "/mlp.so")["mian"])):
        try:
            get()
        except FunctionNotFoundError as exc:
            seen[what] = str(exc)
    seen["attribute"] = type(getattr(lib, "mian", None)).__name__     # lib.mian stays an AttributeError
    seen["class"] = [c.__module__ + "." + c.__name__ for c in type(lib).__mro__[1:3]]
    seen["kept"] = [hasattr(lib, "time_evaluator"), lib["main"] is not None, lib.kind]
    print(json.dumps(seen))
"""


@pytest.mark.parametrize("first", ["", "import tvm"], ids=["without-tvm", "tvm-imported"])
def test_a_missing_function_of_a_loaded_library_is_named_with_those_it_has(shipped, first):
    proc = run_python(MISSING_FUNCTION.format(first=first, folder=str(shipped)))
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["load"] == "no function named 'mian' in the module; functions: 'main'"
    assert seen["load_vm"] == "no function named 'mian' in the module; functions: 'main'"
    model = seen["load of a model"]
    assert "is a Relax model" in model and "jitflow.load_vm(path, device)[name]" in model
    assert seen["attribute"] == "NoneType"
    # the loaded module is still the class it was (TVM's, with its extras, where tvm is imported)
    base = "tvm.runtime.module.Module" if first else "tvm_ffi.module.Module"
    assert seen["class"][0] == base and seen["kept"] == [bool(first), True, "library"]
