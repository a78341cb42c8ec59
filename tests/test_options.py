"""Build options: one frozen value, made by compile(), read (never changed) by the key and the build."""
from __future__ import annotations

import dataclasses
import json
import pickle

import kernels
import models
import pytest
import tvm

import jitflow
from jitflow.options import BuildOptions, InProcess
from jitflow.targets.cuda_floor import CudaVersion


def test_reading_the_key_changes_nothing(cache_dir):
    exe = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", device_options=["-lineinfo"])
    before = exe.options
    key = exe.key
    assert exe.options is before and exe.options == before
    assert before.cuda_floor == CudaVersion(13, 0)        # the compiler's default, resolved once
    assert before.device_options == ("-lineinfo",) and before.relax_pipeline is None
    again = jitflow.compile(kernels.vecadd_cuda(), "cuda", arch="sm_90", device_options=["-lineinfo"])
    assert again.key == key and again.options == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        exe.options.cuda_floor = CudaVersion(13, 1)


def test_a_cpu_target_has_no_cuda_floor_and_a_relax_module_names_its_pipeline(cache_dir):
    assert jitflow.compile(kernels.vecadd(), "c").options.cuda_floor is None
    exe = jitflow.compile(models.mlp(), "c", pass_config={"tirx.disable_vectorize": True})
    assert exe.options.relax_pipeline == "default" and exe.options.pass_config == {"tirx.disable_vectorize": True}


def test_options_travel_as_json_and_pickle_but_process_objects_stay():
    options = BuildOptions.make({"tirx.UnrollLoop": {"auto_max_step": 16}, "tirx.disable_vectorize": True},
                                ["-lineinfo"], "13.0", "zero")
    data = json.loads(json.dumps(options.to_json()))
    assert BuildOptions.from_json(data) == options
    assert pickle.loads(pickle.dumps(options)) == options
    assert data == {"pass_config": {"tirx.UnrollLoop": {"auto_max_step": 16}, "tirx.disable_vectorize": True},
                    "device_options": ["-lineinfo"], "cuda_floor": "13.0", "relax_pipeline": "zero",
                    "cpu_level": None}
    caller = tvm.transform.PassContext(opt_level=2)
    assert "opt_level" not in json.dumps(options.to_json()) and InProcess(caller).pass_context is caller


def test_a_pass_given_as_relax_pipeline_is_kept_in_process(cache_dir):
    exe = jitflow.compile(models.mlp(), "c", relax_pipeline=tvm.relax.get_pipeline("zero"))
    assert exe.options.relax_pipeline is None and exe.options.to_json()["relax_pipeline"] is None
    assert exe.key != jitflow.compile(models.mlp(), "c", relax_pipeline="zero").key


def test_a_cpu_level_travels_resolved(cache_dir):
    """native is resolved where compile() runs: what travels names the CPU, not 'native'."""
    options = jitflow.compile(kernels.axpb(), "c", host="x86_64-linux-gnu", cpu_level="native").options
    data = json.loads(json.dumps(options.to_json()))
    assert BuildOptions.from_json(data) == options and pickle.loads(pickle.dumps(options)) == options
    assert data["cpu_level"]["name"] == "native" and data["cpu_level"]["zig_cpu"].startswith("x86_64")
    assert jitflow.compile(kernels.axpb(), "c", host="x86_64-linux-gnu").options.cpu_level is None
