# Every target that runs code creates .venv and installs the package into it when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.boxjax-installed

.PHONY: demo test bench lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) experiments/stance.py --platform cpu --body simple --envs 128 --unroll 16 --minibatch 512 --iterations 40 --name demo

test: $(STAMP)
	$(PY) -m pytest -q -ra

bench: $(STAMP)
	$(PY) experiments/bench.py

lint: $(STAMP)
	$(VENV)/bin/ruff format --check boxjax experiments tests
	$(VENV)/bin/ruff check boxjax experiments tests

format: $(STAMP)
	$(VENV)/bin/ruff format boxjax experiments tests
	$(VENV)/bin/ruff check --fix boxjax experiments tests

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
