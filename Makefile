# The README's two commands:  `make demo` (the main job) and `make test` (lint + all tests).
# Both create .venv first when it is missing; a second run reuses it (the stamp file only
# changes when pyproject.toml or requirements/constraints.txt change).
SHELL := /bin/bash
VENV := .venv
STAMP := $(VENV)/.k2dec-installed
PY := $(VENV)/bin/python
export K2DEC_PYTHON

.PHONY: demo test lint venv clean-venv docs

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt scripts/setup_venv.sh
	@bash scripts/setup_venv.sh $(VENV)
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/k2dec demo

lint: $(STAMP)
	$(VENV)/bin/ruff check $(wildcard k2dec tests scripts recipes)

test: lint
	$(PY) -m pytest -q tests

clean-venv:
	rm -rf $(VENV)

# The user guide and API reference (Sphinx: MyST, autodoc, sphinx-click), warnings as errors, into
# exp/docs/html/ (tests/test_docs.py builds it the same way).
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -q -b html docs exp/docs/html
	@echo "user guide and API reference: exp/docs/html/index.html"

# `make bench` (BENCHMARKS.md + docs/bench/*.png; `make bench BENCH_ARGS=--quick` for a short
# run under exp/bench-quick/). Peer decoders are installed once into the venv; a failed install
# does not stop the bench (the report lists those peers as missing; rm the stamp to retry).
BENCH_STAMP := $(VENV)/.k2dec-bench-installed
BENCH_ARGS ?=

$(BENCH_STAMP): $(STAMP) $(wildcard requirements/bench-ctc.txt requirements/bench-espnet.txt)
	@if [ -f requirements/bench-ctc.txt ]; then \
	  for pkg in $$(grep -v '^#' requirements/bench-ctc.txt); do \
	    $(PY) -m pip install -c requirements/constraints.txt -c requirements/bench-ctc.txt $$pkg \
	    || echo "bench: installing $$pkg failed; the peers needing it will be reported missing"; \
	  done; \
	fi
	@if [ -f requirements/bench-espnet.txt ]; then \
	  $(PY) -m pip install --no-deps -r requirements/bench-espnet.txt \
	  || echo "bench: installing requirements/bench-espnet.txt failed; ESPnet will be reported missing"; \
	fi
	@touch $(BENCH_STAMP)

.PHONY: bench
bench: $(STAMP) $(BENCH_STAMP)
	$(PY) -m scripts.bench $(BENCH_ARGS)

# `make test-modern`: every test on a second stack, on CPU: Python 3.12, torch 2.x from PyPI,
# numpy 2, and k2 1.24 built from source for them (scripts/test_modern.sh; cached under
# ~/.cache/k2dec/, so only the first run builds k2). Not part of CI: the build takes long.
.PHONY: test-modern
test-modern:
	bash scripts/test_modern.sh
