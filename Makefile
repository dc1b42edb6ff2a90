# cudaperf-jax: `make test` and `make demo` work on a fresh machine (they create .venv and install).
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.cudaperf-installed
# PyTorch for the torch2cuda track; on CPU machines the 2.13.0 CPU build (a local file on our machines).
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# Config overrides for the demo, e.g. DEMO_ARGS='--config.model=PATH.gguf --config.rl_steps=0'
DEMO_ARGS ?=

.PHONY: install test test-slow test-gpu demo lint clean-venv

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): setup.cfg pyproject.toml | $(VPY)
	$(VPY) -m pip install -q --upgrade pip setuptools wheel
	$(VPY) -m pip install -q "$(TORCH_SPEC)"
	$(VPY) -m pip install -q -e ".[torch,dev]"
	touch $(STAMP)

install: $(STAMP)

## The default test suite (no GPU, no download of the default model); CI runs exactly this.
test: $(STAMP)
	$(VPY) -m pytest -q -n 2 $(PYTEST_ARGS)

## Slow tests (real SmolLM2 weights, large corpora); downloads the default model into $$CUDAPERF_CACHE.
test-slow: $(STAMP)
	$(VPY) -m pytest -q -m slow $(PYTEST_ARGS)

## GPU tests: on a machine with an NVIDIA GPU, CuPy and nvcc.
test-gpu: $(STAMP)
	$(VPY) -m pytest -q -m gpu $(PYTEST_ARGS)

## The main job on the embedded defaults (SmolLM2-135M-Instruct, a small task suite, cpu backend without a GPU).
demo: $(STAMP)
	$(VPY) -m experiments.demo --workdir=$${WORKDIR:-runs/demo} $(DEMO_ARGS)

lint: $(STAMP)
	$(VPY) -m ruff check cudaperf_jax kernels_harness experiments tests benchmarks

clean-venv:
	rm -rf $(VENV)
