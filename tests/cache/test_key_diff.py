"""Which key inputs differ, named by their dotted path with the value on each side."""
from __future__ import annotations

from jitflow.cache.key import key_diff


def test_each_differing_leaf_is_named_with_both_values_and_a_missing_branch_once():
    here = {"versions": {"zig": "0.17.1", "tvm": "0.27"}, "options": {"salt": "a", "pass_context": {"x": 1}}}
    there = {"versions": {"zig": "0.16.0", "tvm": "0.27"}, "options": {"pass_context": {"x": 2}}}
    assert key_diff.lines(here, there) == ["options.pass_context.x: here 1, in the cache 2",
                                           "options.salt: here a, in the cache (absent)",
                                           "versions.zig: here 0.17.1, in the cache 0.16.0"]
    assert key_diff.lines(here, here) == []
    assert key_diff.lines({"a": {"b": 1}}, {}, "there") == ["a: here {'b': 1}, there (absent)"]


def test_long_values_are_shortened_and_many_differences_are_counted():
    here = {f"k{i}": "x" * 200 for i in range(8)}
    found = key_diff.lines(here, {}, limit=3)
    assert len(found) == 4 and found[-1] == "and 5 more"
    assert all(len(line) < 120 for line in found[:3]) and found[0].endswith("in the cache (absent)")
