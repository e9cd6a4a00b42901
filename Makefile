# Each target sets itself up: a fresh machine needs only python3 (>= 3.11) and make.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: bench test test-fast lint check clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

bench: $(STAMP)
	$(BIN)/toolbudget bench $(ARGS)

test: $(STAMP)
	$(BIN)/pytest -n 2 -q $(ARGS)

# Everything but the tests marked slow (crash soak, perf smoke, large hypothesis runs): CI runs `test`.
test-fast: $(STAMP)
	$(BIN)/pytest -n 2 -q -m "not slow" $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check budget spill benchmarks tests
	$(BIN)/ruff format --check budget spill benchmarks tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
