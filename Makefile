# Set-up and entry points. `make tune` and `make test` work on a fresh machine:
# each creates the virtual environment first when it is missing or out of date.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
NETWORK ?= alexnet
ARGS ?=

.PHONY: env tune lint test test-all bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

env: $(VENV)/.installed

tune: env
	$(PY) tune.py --network $(NETWORK) $(ARGS)

lint: env
	$(VENV)/bin/ruff check .

test: env
	$(PY) -m pytest -q $(ARGS)

test-all: env
	$(PY) -m pytest -q -m "slow or not slow" $(ARGS)

bench: env
	$(PY) -m bench.trial_overhead

clean:
	rm -rf work
