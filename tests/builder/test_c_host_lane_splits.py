"""Vector statements the C host splits into C vectors and lanes: a select on a vector condition and
float64 math past 16 lanes (pieces of 16 whose values are then split lane by lane), and floor division
and modulo of ints in a `T.vectorized` loop (TVM writes them as vector Lets). Each against numpy and
TVM's LLVM host; what cannot be built names itself and its function."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from conftest import module_cache
from tvm import te

import jitflow
from jitflow.builder.host_c import lanes
from jitflow.errors import HostCodeError

ROWS = 3          # each loop runs three vector iterations
INTS = ("int8", "int16", "int32", "int64")


def _vectorized(outputs: list, inputs: list, lanes_: int):
    sch = tvm.s_tir.Schedule(te.create_prim_func([*inputs, *outputs]))
    for out in outputs:
        (i,) = sch.get_loops(sch.get_sblock(out.op.name))
        _, inner = sch.split(i, [None, lanes_])
        sch.vectorize(inner)
    return sch.mod["main"]


def leaky_relu(lanes_: int, dtype: str):
    """B = A > 0 ? A : A * 0.1: a select whose condition is a vector of bools."""
    A = te.placeholder((ROWS * lanes_,), dtype, name="A")
    B = te.compute(A.shape, lambda i: tvm.tirx.Select(A[i] > 0, A[i], A[i] * tvm.tirx.const(0.1, dtype)), name="B")
    return _vectorized([B], [A], lanes_)


def f64_math(lanes_: int):
    """B = exp(A) + sqrt(|A|) in float64, which C calls libm for lane by lane."""
    A = te.placeholder((ROWS * lanes_,), "float64", name="A")
    B = te.compute(A.shape, lambda i: te.exp(A[i]) + te.sqrt(te.abs(A[i])), name="B")
    return _vectorized([B], [A], lanes_)


def floor_div_mod(lanes_: int, dtype: str):
    """C = floordiv(A, B), D = floormod(A, B) of ints."""
    A = te.placeholder((ROWS * lanes_,), dtype, name="A")
    B = te.placeholder((ROWS * lanes_,), dtype, name="B")
    C = te.compute(A.shape, lambda i: tvm.tirx.floordiv(A[i], B[i]), name="C")
    D = te.compute(A.shape, lambda i: tvm.tirx.floormod(A[i], B[i]), name="D")
    return _vectorized([C, D], [A, B], lanes_)


SELECTS = [(n, d) for n in (17, 32, 64) for d in ("float32", "float64")]
MATH = (17, 24, 32, 64)
DIVS = [(n, d) for d in INTS for n in (4, 8, 16)]


def _module() -> tvm.IRModule:
    funcs = {f"leaky_{d}_x{n}": leaky_relu(n, d) for n, d in SELECTS}
    funcs |= {f"f64math_x{n}": f64_math(n) for n in MATH}
    funcs |= {f"floordiv_{d}_x{n}": floor_div_mod(n, d) for n, d in DIVS}
    return tvm.IRModule({name: f.with_attr("global_symbol", name) for name, f in funcs.items()})


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(jitflow's build on "c", TVM's build with its LLVM host) of every function above."""
    with module_cache(tmp_path_factory, zig_cache):
        mod = _module()
        exe = jitflow.compile(mod, "c")
        exe.jit()
        yield exe, tvm.compile(mod, "llvm")


def _run(function, *arrays: np.ndarray) -> list[np.ndarray]:
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    function(*tensors)
    return [t.numpy() for t in tensors]


@pytest.mark.parametrize("host", ["jitflow", "llvm"])
@pytest.mark.parametrize("lanes_, dtype", SELECTS)
def test_select_on_a_vector_condition_past_16_lanes(built, host, lanes_, dtype):
    a = np.random.default_rng(lanes_).standard_normal(ROWS * lanes_).astype(dtype)
    function = built[0 if host == "jitflow" else 1][f"leaky_{dtype}_x{lanes_}"]
    _, b = _run(function, a, np.zeros_like(a))
    np.testing.assert_array_equal(b, np.where(a > 0, a, a * np.array(0.1, dtype)))


@pytest.mark.parametrize("host", ["jitflow", "llvm"])
@pytest.mark.parametrize("lanes_", MATH)
def test_float64_math_past_16_lanes(built, host, lanes_):
    a = np.random.default_rng(lanes_).uniform(-20, 20, ROWS * lanes_)
    _, b = _run(built[0 if host == "jitflow" else 1][f"f64math_x{lanes_}"], a, np.zeros_like(a))
    np.testing.assert_allclose(b, np.exp(a) + np.sqrt(np.abs(a)), rtol=1e-15)


def _div_inputs(dtype: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Dividends over the type's range and divisors of both signs, never 0 and never min / -1 (which
    overflows), with the signs' four combinations, exact multiples and the extremes among them."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(count)
    a = rng.integers(info.min + 1, info.max, count, dtype=dtype, endpoint=True)
    b = rng.integers(-9, 10, count).astype(dtype)
    b[b == 0] = 7
    b[: count // 4] = rng.integers(info.min, info.max, count // 4, dtype=dtype, endpoint=True) | 1
    edges = np.array([info.min, info.max, -1, 0, 1, -7, 7, -21, 21, info.min + 1], dtype)
    a[-len(edges):] = edges
    b[-len(edges):] = np.array([7, -7, 3, -3, -2, 7, -7, 7, -7, -1], dtype)
    return a, b


@pytest.mark.parametrize("host", ["jitflow", "llvm"])
@pytest.mark.parametrize("lanes_, dtype", DIVS)
def test_vectorized_floordiv_and_floormod_of_ints(built, host, lanes_, dtype):
    """Floor semantics, as numpy's // and %: rounded toward minus infinity, the remainder taking the
    divisor's sign."""
    a, b = _div_inputs(dtype, ROWS * lanes_)
    function = built[0 if host == "jitflow" else 1][f"floordiv_{dtype}_x{lanes_}"]
    _, _, c, d = _run(function, a, b, np.zeros_like(a), np.zeros_like(a))
    np.testing.assert_array_equal(c, a // b)
    np.testing.assert_array_equal(d, a % b)


def test_wide_statements_stay_c_vectors_where_they_can(built):
    """A 32-lane float64 statement is cut into pieces of C vectors, and only the libm calls split."""
    source = (built[0].build_info.library.parent / "src" / "host.c").read_text()
    assert "B_piece16" in source and "exp(" in source


def test_a_split_that_loses_a_binding_names_the_statement_and_function(env_cache, monkeypatch):
    """Should the pass ever leave a part of a split statement unbound, the error says which statement
    and which function, rather than TVM's printer's "undefined variable" in no function."""
    monkeypatch.setattr(lanes.LaneSplitter, "_bind_piece", lambda self, stmt: tvm.tirx.Evaluate(0))
    mod = tvm.IRModule({"leaky": leaky_relu(32, "float32").with_attr("global_symbol", "leaky"),
                        "plain": leaky_relu(8, "float32").with_attr("global_symbol", "plain")})
    with pytest.raises(HostCodeError) as err:
        jitflow.compile(mod, "c", cache=False).build()
    assert err.value.functions == ["leaky"], str(err.value)
    assert err.value.construct.startswith("the store of float32x32 into B[T.Ramp(")
    assert "its part B_piece0 was left unbound" in err.value.construct


@pytest.fixture
def env_cache(tmp_path_factory, zig_cache):
    with module_cache(tmp_path_factory, zig_cache):
        yield
