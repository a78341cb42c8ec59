"""Which intrinsic lowering rules the key records: those not compiled into TVM, seen again on every key,
whether TVM's op names come from the install memo or from TVM."""
from __future__ import annotations

import json

from conftest import run_python


def test_only_rules_that_are_not_tvms_own_are_recorded_and_a_replaced_rule_is_seen():
    out = run_python("""
        import json, tvm
        from jitflow.cache.key.lowering_rules import foreign_rules
        seen = [foreign_rules(("c", "cuda"))]
        def first(op):
            return op.args[0]
        tvm.tirx.register_intrin_lowering("tirx.sigmoid", "default", f=first, level=99)
        seen.append(foreign_rules(("c",)))
        def second(op):
            return op.args[0] + op.args[0]
        tvm.tirx.register_intrin_lowering("tirx.sigmoid", "default", f=second, level=100)
        seen.append(foreign_rules(("c",)))
        def device(op):
            return op.args[0]
        tvm.tirx.register_intrin_lowering("tirx.ptx.atom_bitbucket", "c", f=device, level=99)
        seen.append(foreign_rules(("c",), "T.ptx.atom_bitbucket(x)"))   # named by the module
        print(json.dumps(seen))
    """)
    plain, first, second, named = json.loads(out.stdout)
    assert plain == {}      # TVM's own rules (in its libraries) are covered by TVM's version
    assert first["tirx.sigmoid default.FLowerIntrinsic float32"] == "x0"
    assert second["tirx.sigmoid default.FLowerIntrinsic float32"] == "x0 + x0"
    assert set(first) == set(second) == {f"tirx.sigmoid default.FLowerIntrinsic {d}" for d in
                                         ("bfloat16", "float16", "float32", "float64", "int32", "int64")}
    assert "tirx.ptx.atom_bitbucket c.FLowerIntrinsic float32" in named


def test_a_device_intrinsics_rule_counts_for_a_cpu_build_only_where_it_can_be_reached():
    out = run_python("""
        import json, tvm
        from jitflow.cache.key.lowering_rules import foreign_rules
        def device(op):
            return op.args[0]
        tvm.tirx.register_intrin_lowering("tirx.ptx.atom_bitbucket", "default", f=device, level=99)
        seen = [foreign_rules(("c",), "T.exp(x)"), foreign_rules(("c", "cuda"), "T.exp(x)")]
        def first(op):
            return op.args[0]
        tvm.tirx.register_intrin_lowering("tirx.sigmoid", "default", f=first, level=99)
        seen.append(foreign_rules(("c",), "T.exp(x)"))   # a rule that is not TVM's own may bring it in
        print(json.dumps([sorted({k.rsplit(" ", 1)[0] for k in found}) for found in seen]))
    """)
    cpu, cuda, with_another = json.loads(out.stdout)
    rule = "tirx.ptx.atom_bitbucket default.FLowerIntrinsic"
    assert cpu == [] and cuda == [rule]
    assert with_another == sorted([rule, "tirx.sigmoid default.FLowerIntrinsic"])


#: one process of the memo tests: what it registers before importing jitflow, then its foreign rules
MEMO_PROCESS = """
    import json, tvm
    {before}
    from jitflow.cache.key import lowering_rules
    if {no_listing}:   # the op names must come from the memo: converting TVM's list fails
        _ffi = lowering_rules._ffi
        def _no_stringify(name):
            if name == "ffi.json.Stringify":
                raise AssertionError("TVM's list of ops was converted although the memo holds it")
            return _ffi(name)
        lowering_rules._ffi = _no_stringify
    print(json.dumps(sorted({{k.rsplit(" ", 1)[0] for k in lowering_rules.foreign_rules(("c",), "")}})))
"""


def _memo_process(tmp_path, before: str = "", no_listing: bool = False) -> list[str]:
    env = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    out = run_python(MEMO_PROCESS.format(before=before, no_listing=no_listing), env=env)
    return json.loads(out.stdout.splitlines()[-1])


SIGMOID_RULE = """
    tvm.tirx.register_intrin_lowering("tirx.sigmoid", "default", f=lambda op: op.args[0], level=99)
"""
NEW_OP_RULE = """
    tvm.ir.register_op_attr("jitflowtest.fast", "default.FLowerIntrinsic", lambda op: op.args[0], 99)
"""


def test_with_the_op_names_memoized_a_rule_registered_before_jitflow_is_still_seen(tmp_path):
    assert _memo_process(tmp_path) == []                        # lists TVM's ops and memoizes their names
    memos = sorted(p.name for p in (tmp_path / "pycache").rglob("jitflow-tvm-ops-*.json"))
    assert [m.rsplit("-", 1)[1] for m in memos] == ["device.json", "host.json"]
    # the next process takes the names from the memo (converting TVM's list would fail), and sees the rule
    assert _memo_process(tmp_path, SIGMOID_RULE, no_listing=True) == ["tirx.sigmoid default.FLowerIntrinsic"]


def test_a_memo_damaged_or_taken_from_other_ops_is_not_used(tmp_path):
    # a new op with a rule of its own: TVM lists one op more, and the memo is taken from that list
    assert _memo_process(tmp_path, NEW_OP_RULE) == ["jitflowtest.fast default.FLowerIntrinsic"]
    for memo in (tmp_path / "pycache").rglob("jitflow-tvm-ops-*.json"):
        data = json.loads(memo.read_text())
        memo.write_text(json.dumps(dict(data, names=[1, 2, 3])))    # the same list's memo, its names damaged
    assert _memo_process(tmp_path, NEW_OP_RULE) == ["jitflowtest.fast default.FLowerIntrinsic"]
    # a process without the new op lists other ops than the memo's (whose names it could not even get)
    assert _memo_process(tmp_path) == []
