# Every target that runs code creates .venv and installs the package into it when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.boxjax-installed

.PHONY: demo demo-stance test bench lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,watch,tensorboard]"
	touch $(STAMP)

# The main job, small (`boxjax demo`): blocking training of the simple body on the CPU path, face episodes
# against the simulated opponent with the shipped walking teacher's legs distilled, then its curves image and, when
# MuJoCo's offscreen OpenGL works, a 3 s video. The training stops at 6.5 minutes; docs/guide.md says what it
# shows and cites a run's metrics. demo-stance: the stance task (its return rises slowly; falls do not move).
demo: $(STAMP)
	$(VENV)/bin/boxjax demo

demo-stance: $(STAMP)
	$(VENV)/bin/boxjax train --task stance --platform cpu --body simple --envs 128 --unroll 16 --minibatch 512 --iterations 200 --name demo-stance

test: $(STAMP)
	$(PY) -m pytest -q -ra --durations=15 -n 2 --dist loadfile

# On a GPU: the stance table, the factorisation kernel and the blocking task; on a CPU-only machine a small
# stance table and the CPU path (mujoco.batch) against a bare mj_step. Last, the seed's price-and-speed table
# of the blocking training from every kept row. `boxjax bench` runs them in turn (`boxjax bench --help` lists the
# tools one by one).
bench: $(STAMP)
	$(VENV)/bin/boxjax bench

lint: $(STAMP)
	$(VENV)/bin/ruff format --check boxjax experiments tests
	$(VENV)/bin/ruff check boxjax experiments tests

format: $(STAMP)
	$(VENV)/bin/ruff format boxjax experiments tests
	$(VENV)/bin/ruff check --fix boxjax experiments tests

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
