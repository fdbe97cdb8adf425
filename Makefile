# The README's two commands:  `make demo` (the main job) and `make test` (lint + all tests).
# Both create .venv first when it is missing; a second run reuses it (the stamp file only
# changes when pyproject.toml or requirements/constraints.txt change).
SHELL := /bin/bash
VENV := .venv
STAMP := $(VENV)/.k2dec-installed
PY := $(VENV)/bin/python
export K2DEC_PYTHON

.PHONY: demo test lint venv clean-venv

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
