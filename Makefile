# MegaFlow: two commands on a fresh clone.
#   make run   - set up .venv and run the main job: the train quickstart, the closed RL loop
#                (megaflow train examples/train-quickstart.yaml) on embedded defaults, beside
#                its shuffled-reward control; fails unless the trained policy beats the control
#   make test  - set up .venv (and system packages when root) and run every test
#   make eval  - the evaluation job (gold and empty patches on the mini-SWE set)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FAMILY := tasks/settings-kinds
POLICY := .megaflow/models/settings-kinds
QUICKSTART := .megaflow/train/quickstart
# Test processes (pytest-xdist), a test file each at a time: its fixtures stay in one process.
# Files go out in collection order, which tests/fixtures/ordering.py makes longest first
# (xdist's own reorder puts the files with most tests first, the long single tests last).
TEST_WORKERS ?= 2
XDIST  := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: setup sysdeps openhands run eval train test test-fast lint fmt bench proto clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,model,container,parquet,rpc,train,agents,postgres,mongo,redis,s3,ray,kubernetes]'
	touch $(STAMP)

setup: $(STAMP) openhands

# The OpenHands SDK needs Python >= 3.12: a venv of its own, $(VENV)/openhands (idempotent).
openhands: | $(PY)
	bash scripts/install-openhands.sh $(VENV)

sysdeps:
	bash scripts/install-sysdeps.sh

# Built once; again when the family's demonstrations or build settings change. The build
# fails (exit 1, no policy left) if the warm policy does not copy the held-out issues.
# One torch thread per process: the policy is tiny, and on a shared machine a second
# thread mostly spins (the warm start, under load, took several times the CPU per step with
# the default threads).
$(POLICY) run: export OMP_NUM_THREADS ?= 1
$(POLICY): $(FAMILY)/demonstrations.jsonl $(FAMILY)/policy.json $(FAMILY)/warm_start.json | $(STAMP)
	rm -rf $(POLICY)
	$(PY) -m megaflow.app.training.quickstart $(POLICY) --tasks $(FAMILY)

# The trained arm, its control (the same loop, each group's rewards shuffled; it starts
# from the same weights, so the trained arm's round before training serves both), the verdict.
run: $(STAMP) sysdeps $(POLICY)
	$(VENV)/bin/megaflow train examples/train-quickstart.yaml --curve $(QUICKSTART)/trained.png
	$(VENV)/bin/megaflow train examples/train-quickstart.yaml --control shuffled --no-eval-before \
		--curve $(QUICKSTART)/control.png
	$(VENV)/bin/megaflow train compare $(QUICKSTART)/trained.json $(QUICKSTART)/control.json

train: run

eval: $(STAMP) sysdeps
	$(VENV)/bin/megaflow run examples/quickstart.yaml

test: $(STAMP) sysdeps openhands
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not slow and not services and not container and not ray" $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix src tests benchmarks examples
	$(VENV)/bin/ruff format src tests benchmarks examples

bench: $(STAMP) sysdeps $(POLICY)
	$(VENV)/bin/megaflow bench

proto: $(STAMP)
	$(PY) -m megaflow.rpc.codegen

clean:
	rm -rf $(VENV) .megaflow .pytest_cache .mypy_cache .ruff_cache
