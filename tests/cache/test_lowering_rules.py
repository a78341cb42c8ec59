"""Which intrinsic lowering rules the key records: those not compiled into TVM, seen again on every key."""
from __future__ import annotations

import json

from conftest import run_python


def test_only_rules_that_are_not_tvms_own_are_recorded_and_a_replaced_rule_is_seen():
    out = run_python("""
        import json, tvm
        from jitflow.cache.lowering_rules import foreign_rules
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
        from jitflow.cache.lowering_rules import foreign_rules
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
