# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.jitflow-installed

.PHONY: demo test test-faults test-tune test-ray test-pythons soak gpu-artifacts bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cuda,dev,tune,sass,sign]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/vecadd_cpu.py
	$(PY) examples/vecadd_cpu.py

# the whole suite, one worker per core (tests needing a GPU are skipped where there is none)
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile -m "not ray and not tune and not slow and not pythons"

# the fault and race runs (tests marked slow) at their few repetitions: the kill test 8 times, the
# prune-while-reading race once, races of 8 processes, the bit-flip and re-sealed library trials
test-faults: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile -m "slow and not ray and not tune"

# real MetaSchedule tuning runs through jitflow's builder (a minute or two on 2 cores)
test-tune: $(STAMP)
	$(PY) -m pytest -q -m tune tests/meta_schedule

# the same cache keys under another minor version of Python (pyenv's, or python3.N on PATH): its
# environment, the packages a key reads at the versions installed here, is made once per machine under
# the user's cache (a minute or two the first time, from pip's cache), then the test takes some 10 s
test-pythons: $(STAMP)
	$(PY) -m pytest -q -m pythons tests/cache/test_key_travels.py

# build_all on a local Ray cluster (the tests start one of 2 CPUs); installs the ray extra first if needed
RAY_STAMP := $(VENV)/.jitflow-ray-installed
$(RAY_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[cuda,dev,tune,sass,sign,ray]'
	touch $(RAY_STAMP)

test-ray: $(RAY_STAMP)
	$(PY) -m pytest -q -m ray tests/farm

# the long repetitions (tests marked slow): the kill test 100 times, the prune-while-reading race 20 times,
# races of 16 processes
soak: $(STAMP)
	JITFLOW_SOAK=1 $(PY) -m pytest -q -m slow

# the libraries the GPU tests load in a runtime-only install (built here, carried to the GPU machine)
gpu-artifacts: $(STAMP)
	$(PY) tests/gpu_artifacts.py .gpu-artifacts

bench: $(STAMP)
	$(PY) benchmarks/warm_start.py
	$(PY) benchmarks/tune.py --trials 16 --per-iter 8 --workers 2 --cost-model random --strategy replay-trace

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
