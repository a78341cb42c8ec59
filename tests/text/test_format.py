"""Text for people: durations side by side at one precision, and the article before a name."""
from __future__ import annotations

import pytest

from jitflow.text.format import article, durations


@pytest.mark.parametrize("seconds, written", [
    ((10.84, 3.2), ["10.84 s", "3.20 s"]),
    ((10.84, 75.3), ["11 s", "1 min 15 s"]),          # was "10.84 s" beside "1 min": two precisions
    ((0.0, 59.999), ["0 s", "1 min"]),                 # rounds up to a minute: not "60.00 s"
    ((420.0, 7500.0), ["7 min", "2 h 5 min"]),
    ((10800.0, 187200.0), ["3 h", "2 days 4 h"]),
    ((0.0, 0.0), ["0.00 s", "0.00 s"]),
])
def test_durations_side_by_side_share_one_precision(seconds, written):
    assert durations(*seconds) == written


@pytest.mark.parametrize("name, said", [("aarch64-linux-gnu", "an"), ("x86_64-linux-gnu", "an"), ("int8", "an"),
                                        ("IRModule", "an"), ("Executable", "an"), ("uint8", "a"), ("float16", "a"),
                                        ("str", "a"), ("sm_90", "an"), ("bfloat16", "a")])
def test_the_article_is_the_one_the_name_is_read_with(name, said):
    assert article(name) == said


@pytest.mark.parametrize("dtype, said", [("int3", "an int3 tensor has no numpy counterpart"),
                                         ("uint3", "a uint3 tensor has no numpy counterpart")])
def test_a_tensor_without_a_numpy_dtype_is_named_with_its_article(dtype, said):
    from jitflow.errors import InvalidInputError
    from jitflow.runtime.tensors import numpy_dtype

    with pytest.raises(InvalidInputError, match=f"^{said}; read it through DLPack"):
        numpy_dtype(dtype)
