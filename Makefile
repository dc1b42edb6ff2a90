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

.PHONY: install test test-slow test-gpu demo demo-method lint clean-venv

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

## The main job on the embedded defaults (Qwen2.5-Coder-0.5B-Instruct, the demo suite, cpu backend without a GPU).
demo: $(STAMP)
	$(VPY) -m experiments.demo --workdir=$${WORKDIR:-runs/demo} $(DEMO_ARGS)

## The whole miniature (SFT step, RL step over 2 turns, held-out evaluation of both policies): ~19 minutes on 2 cores.
demo-method: $(STAMP)
	$(VPY) -m experiments.demo --workdir=$${WORKDIR:-runs/demo-method} --config.sft_steps=1 --config.rl_steps=1 \
		--config.rl_turns=2 --config.eval_tasks=1 $(DEMO_ARGS)

lint: $(STAMP)
	$(VPY) -m ruff check cudaperf_jax kernels_harness experiments tests benchmarks

clean-venv:
	rm -rf $(VENV)
