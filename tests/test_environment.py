"""The installed environment itself: the pinned tvm-ffi keeps TVM's JSON serializer working."""
from __future__ import annotations

import subprocess
import sys

from jitflow.doctor.checks import CHECKED_ML_DTYPES, CHECKED_TVM_FFI, ml_dtypes_check, tvm_ffi_check

_ROUND_TRIP = r"""
import tvm
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] + T.float32(1)

mod = tvm.IRModule({"main": add_one})
text = tvm.ir.save_json(mod)
back = tvm.ir.load_json(text)
tvm.ir.assert_structural_equal(back, mod)
var = tvm.ir.load_json(tvm.ir.save_json(tvm.tirx.Var("x", "int32")))
assert var.name == "x" and str(var.ty) == str(tvm.tirx.Var("x", "int32").ty)
print("round trip ok")
"""


def test_save_json_round_trips_a_module_in_a_fresh_process(tmp_path):
    # a fresh process: with an unchecked tvm-ffi (0.1.15) the serializer segfaults, which would kill pytest
    script = tmp_path / "round_trip.py"   # TVMScript reads its source from a file
    script.write_text(_ROUND_TRIP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert "round trip ok" in done.stdout


def test_the_installed_tvm_ffi_is_the_checked_one():
    import importlib.metadata

    assert importlib.metadata.version("apache-tvm-ffi") == CHECKED_TVM_FFI


def test_doctor_flags_a_tvm_ffi_other_than_the_checked_one():
    assert tvm_ffi_check(CHECKED_TVM_FFI).ok
    other = tvm_ffi_check("0.1.15.post2")
    assert not other.ok and CHECKED_TVM_FFI in other.detail and "0.1.15.post2" in other.detail
    assert f"apache-tvm-ffi=={CHECKED_TVM_FFI}" in other.fix
    missing = tvm_ffi_check(None)
    assert not missing.ok and "not installed" in missing.detail


def test_the_installed_ml_dtypes_is_the_checked_one():
    import importlib.metadata

    assert importlib.metadata.version("ml_dtypes") == CHECKED_ML_DTYPES


def test_doctor_warns_of_an_ml_dtypes_other_than_the_checked_one():
    assert ml_dtypes_check(CHECKED_ML_DTYPES).ok
    other = ml_dtypes_check("0.7.0")
    assert not other.ok and not other.required and "0.7.0, not the checked 0.6.0" in other.detail
    assert other.fix == f"pip install 'ml_dtypes=={CHECKED_ML_DTYPES}'"
    assert not ml_dtypes_check(None).ok
