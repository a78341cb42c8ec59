"""Bad settings and arguments: a clear error or one warning, never silence."""
from __future__ import annotations

import kernels
import pytest
from conftest import run_python

import jitflow
from jitflow.errors import InvalidInputError


@pytest.mark.parametrize("kwargs, says", [
    ({"cache": "no"}, "cache must be True, False or None"),
    ({"cache": 0}, "cache must be True, False or None"),
    ({"cache_dir": 3}, "cache_dir must be a path"),
    ({"cache_dir": " "}, "cache_dir is empty"),
    ({"cuda_compiler": 3}, "cuda_compiler must be one of nvrtc, nvcc"),
])
def test_arguments_of_the_wrong_kind_are_refused(kwargs, says):
    with pytest.raises(InvalidInputError, match=says):
        jitflow.compile(kernels.axpb(), "c", **kwargs)


def test_false_and_none_still_mean_what_they_say(cache_dir):
    assert not jitflow.compile(kernels.axpb(), "c", cache=False).settings.cache_enabled
    assert jitflow.compile(kernels.axpb(), "c", cache=None).settings.cache_enabled


@pytest.mark.parametrize("variable, says", [
    ("JITFLOW_LOG", "JITFLOW_LOG='bogus' is not a level"),
    ("JITFLOW_PROGRESS", "JITFLOW_PROGRESS='bogus' is not auto, 1 or 0"),
])
def test_a_bad_log_or_progress_setting_warns_once(cache_dir, variable, says):
    code = """
        import jitflow, kernels
        for scale in (1.0, 2.0, 3.0):
            jitflow.compile(kernels.axpb(scale), "c")
    """
    err = run_python(code, env={variable: "bogus"}).stderr
    assert err.count(says) == 1, err


def test_a_bad_boolean_or_size_setting_is_an_error(cache_dir, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE", "maybe")
    with pytest.raises(InvalidInputError, match="JITFLOW_CACHE='maybe' is not a boolean"):
        jitflow.compile(kernels.axpb(), "c")
    monkeypatch.setenv("JITFLOW_CACHE", "1")
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", "lots")
    with pytest.raises(InvalidInputError, match="JITFLOW_CACHE_MAX_SIZE 'lots' is not a size"):
        jitflow.compile(kernels.axpb(), "c")
