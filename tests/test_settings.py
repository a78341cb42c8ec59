"""Bad settings and arguments: a clear error or one warning, never silence."""
from __future__ import annotations

import kernels
import pytest
from conftest import run_python

import jitflow
from jitflow.errors import InvalidInputError


@pytest.mark.parametrize("kwargs, says", [
    ({"cache": "no"}, "cache must be True, False, 'readonly' or None"),
    ({"cache": 0}, "cache must be True, False, 'readonly' or None"),
    ({"record": 3}, "record must be the path of a file"),
    ({"record": " "}, "record must be the path of a file"),
    ({"cache_dir": 3}, "cache_dir must be a path"),
    ({"cache_dir": " "}, "cache_dir is empty"),
    ({"cuda_compiler": 3}, "cuda_compiler must be one of nvrtc, nvcc"),
])
def test_arguments_of_the_wrong_kind_are_refused(kwargs, says):
    with pytest.raises(InvalidInputError, match=says):
        jitflow.compile(kernels.axpb(), "c", **kwargs)


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_cache_dir_is_refused_by_with_cache_and_the_cli(empty, cache_dir, tmp_path, monkeypatch, capsys):
    """An empty cache folder would be the current folder (./v1/): refused as compile() refuses it."""
    from jitflow.cli.main import main

    exe = jitflow.compile(kernels.axpb(4.5), "c")
    with pytest.raises(InvalidInputError, match="cache_dir is empty"):
        exe.with_cache(cache_dir=empty)
    (tmp_path / "model.py").write_text("import jitflow, kernels\nexe = jitflow.compile(kernels.axpb(4.5), 'c')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["build", "model.py:exe", "--cache-dir", empty, "-o", str(tmp_path / "k.so")]) == 2
    assert "cache_dir is empty" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]      # no ./v1/, no library


def test_an_unknown_pass_config_option_names_the_nearest_before_anything_is_built(cache_dir):
    with pytest.raises(InvalidInputError) as err:
        jitflow.compile(kernels.axpb(), "c", pass_config={"tirx.disable_vectorise": True})
    assert str(err.value).startswith("pass_config: 'tirx.disable_vectorise' is not a TVM PassContext option; "
                                     "the nearest are tirx.disable_vectorize, ")
    with pytest.raises(InvalidInputError, match="pass_config: TVM refuses the value: .*tirx.disable_vectorize"):
        jitflow.compile(kernels.axpb(), "c", pass_config={"tirx.disable_vectorize": "maybe"})
    assert jitflow.compile(kernels.axpb(), "c", pass_config={"tirx.disable_vectorize": True}).options.pass_config


def test_false_and_none_still_mean_what_they_say(cache_dir):
    assert not jitflow.compile(kernels.axpb(), "c", cache=False).settings.cache_enabled
    assert jitflow.compile(kernels.axpb(), "c", cache=None).settings.cache_enabled


@pytest.mark.parametrize("value", ["readonly", "ReadOnly", " readonly "])
def test_readonly_is_a_cache_mode_by_argument_and_by_variable(cache_dir, monkeypatch, value):
    settings = jitflow.compile(kernels.axpb(), "c", cache=value).settings
    assert settings.cache_enabled and settings.cache_readonly
    monkeypatch.setenv("JITFLOW_CACHE", value)
    settings = jitflow.compile(kernels.axpb(), "c").settings
    assert settings.cache_enabled and settings.cache_readonly
    # the argument wins over the variable, both ways
    assert not jitflow.compile(kernels.axpb(), "c", cache=True).settings.cache_readonly
    exe = jitflow.compile(kernels.axpb(), "c", cache=True).with_cache("readonly")
    assert exe.settings.cache_readonly and not exe.with_cache(False).settings.cache_enabled
    with pytest.raises(InvalidInputError, match="cache must be True, False, 'readonly' or None"):
        exe.with_cache("read-only")


def test_record_comes_from_the_argument_else_the_variable_made_absolute(cache_dir, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert jitflow.compile(kernels.axpb(), "c").settings.record is None
    monkeypatch.setenv("JITFLOW_RECORD", "env.jsonl")
    assert jitflow.compile(kernels.axpb(), "c").settings.record == tmp_path / "env.jsonl"
    assert jitflow.compile(kernels.axpb(), "c", record="arg.jsonl").settings.record == tmp_path / "arg.jsonl"


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
    with pytest.raises(InvalidInputError, match="JITFLOW_CACHE='maybe' is not a boolean or readonly"):
        jitflow.compile(kernels.axpb(), "c")
    monkeypatch.setenv("JITFLOW_CACHE", "1")
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", "lots")
    with pytest.raises(InvalidInputError, match="JITFLOW_CACHE_MAX_SIZE 'lots' is not a size"):
        jitflow.compile(kernels.axpb(), "c")


HUGE = "9" * 401


@pytest.mark.parametrize("variable, value, says", [
    ("JITFLOW_CACHE_MAX_SIZE", HUGE, "is too large; at most 8 EiB"),
    ("JITFLOW_CACHE_MAX_SIZE", HUGE + "GiB", "is too large; at most 8 EiB"),
    ("JITFLOW_CACHE_MAX_SIZE", "inf", "is not a size"),
    ("JITFLOW_REMOTE_CACHE_MAX_BYTES", HUGE, "is too large; at most 8 EiB"),
    ("JITFLOW_BUILD_JOBS", "inf", "is not a whole number"),
    ("JITFLOW_BUILD_JOBS", "nan", "is not a whole number"),
    ("JITFLOW_BUILD_JOBS", "1e400", "is not a whole number"),
    ("JITFLOW_BUILD_JOBS", HUGE, "is too large; at most 1024"),
    ("JITFLOW_REMOTE_CACHE_TIMEOUT", "inf", "is not a number"),
    ("JITFLOW_REMOTE_CACHE_TIMEOUT", "nan", "is not a number"),
    ("JITFLOW_REMOTE_CACHE_LOCK_TTL", "1e400", "is not a number"),
    ("JITFLOW_REMOTE_CACHE_LOCK_TTL", HUGE, "is too large"),
])
def test_huge_or_non_finite_numbers_are_clear_errors(cache_dir, monkeypatch, variable, value, says):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidInputError, match=f"{variable}.*{says}"):
        jitflow.compile(kernels.axpb(), "c")


def test_sizes_have_units_up_to_exbibytes_and_are_whole_bytes(cache_dir, monkeypatch):
    from jitflow import config

    assert config.parse_size("2PiB") == 2 << 50 and config.parse_size("3PB") == 3 * 1000**5
    assert config.parse_size("7EiB") == 7 << 60 and config.parse_size("9.2EB") == 92 * 10**17
    assert config.parse_size("1.5KiB") == 1536 and config.parse_size("0.5kb") == 500
    with pytest.raises(InvalidInputError, match="'8EiB' is too large; at most 8 EiB less one byte"):
        config.parse_size("8EiB")
    for fraction in ("1.5", "1.5B", "1.0005KB"):
        with pytest.raises(InvalidInputError, match=f"'{fraction}' is not a whole number of bytes"):
            config.parse_size(fraction, "size")
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", "1.5")        # was read as 1 byte: every build evicted all
    with pytest.raises(InvalidInputError, match="JITFLOW_CACHE_MAX_SIZE '1.5' is not a whole number of bytes"):
        jitflow.compile(kernels.axpb(), "c")
    monkeypatch.setenv("JITFLOW_CACHE_MAX_SIZE", "1PiB")
    assert jitflow.compile(kernels.axpb(), "c").settings.cache_max_size == 1 << 50


def test_sizes_durations_and_numbers_read_exactly_up_to_their_limits():
    from jitflow import config

    assert config.parse_size("1.5GiB") == 3 << 29 and config.parse_size("0") == 0
    assert config.parse_size(str(config.MAX_BYTES)) == config.MAX_BYTES
    with pytest.raises(InvalidInputError, match="too large"):
        config.parse_size(str(config.MAX_BYTES + 1))
    assert config.parse_duration("36500d") == config.MAX_SECONDS
    with pytest.raises(InvalidInputError, match="--older-than '36501d' is too large; at most 100 years"):
        config.parse_duration("36501d", "--older-than")
    assert config.parse_number("0.5", "T", 10) == 0.5 and config.parse_number("1024", "J", 1024, whole=True) == 1024
    with pytest.raises(InvalidInputError, match="T='0' is not a positive number"):
        config.parse_number("0", "T", 10)


def test_the_settings_are_only_what_users_set():
    """A hook for tests is not a setting of the package: the tests reach it from tests/ (die_once.py)."""
    from jitflow import config

    assert [name for name in config.ENVIRONMENT if "TEST" in name] == []
    assert not [name for name in dir(config) if "die" in name.lower()]
