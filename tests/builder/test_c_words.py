"""The C host's word scans (c_words.py) find what a leading \\b finds, and only that."""
from __future__ import annotations

import re

from jitflow.builder.host_c import mathlib, prelude
from jitflow.builder.host_c.c_words import word, words

TEXT = ("jitflow_expf(x); y = xjitflow_logf(a) + jitflow_tanhf_x4(v);\n"
        "float4 t = _float4; int32_t8 u; float44 no; my_float4 no; (float8)w; half16 h;\n"
        "z = jitflow_max_float(a, b) * __jitflow_min_int32_t(c, d) + jitflow_min_float_x8(e, f);\n")


def test_word_finds_what_a_leading_boundary_finds():
    for prefix, rest in [("jitflow_", r"(\w+?)(?:_x(\d+))?\("), ("jitflow_", r"(min|max)_([a-z0-9_]+?)(?:_x(\d+))?\(")]:
        expected = re.compile(rf"\b{prefix}{rest}").findall(TEXT)
        assert word(prefix, rest).findall(TEXT) == expected
        assert expected                     # the text has matches, and non-matches inside other words
    assert word("jitflow_", r"\w+\(").findall("jitflow_f(") == ["jitflow_f("]     # at the very start


def test_words_keeps_the_matches_that_start_a_word():
    found = [m.groups() for m in words(prelude._VECTOR_TYPE_RE, TEXT)]
    expected = re.compile(r"\b" + prelude._VECTOR_TYPE_RE.pattern).findall(TEXT)
    assert found == expected == [("float", "4"), ("int32_t", "8"), ("float", "8"), ("half", "16")]


def test_math_calls_are_counted_as_before():
    assert mathlib.used(TEXT) == {1: {"expf"}, 4: {"tanhf"}}
    assert mathlib.call_count(TEXT) == 2
