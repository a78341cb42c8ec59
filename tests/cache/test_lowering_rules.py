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
        print(json.dumps(seen))
    """)
    plain, first, second = json.loads(out.stdout)
    assert plain == {}      # TVM's own rules (in its libraries) are covered by TVM's version
    assert first["tirx.sigmoid default.FLowerIntrinsic float32"] == "x0"
    assert second["tirx.sigmoid default.FLowerIntrinsic float32"] == "x0 + x0"
    assert set(first) == set(second) == {f"tirx.sigmoid default.FLowerIntrinsic {d}" for d in
                                         ("bfloat16", "float16", "float32", "float64", "int32", "int64")}
