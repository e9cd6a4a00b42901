# Each target sets itself up: a fresh machine needs only python3 (>= 3.11) and make.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: bench test test-fast lint docs check clean

# pip stays quiet (-q) but each step says what it does: the first set-up takes about a minute.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (first run or pyproject.toml changed; about a minute)"
	@echo "  creating the virtualenv with $(PY)"
	@$(PY) -m venv $(VENV)
	@echo "  upgrading pip"
	@$(BIN)/pip install -q --upgrade pip
	@echo "  installing toolbudget with every extra (pip install -e '.[dev]')"
	@$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)
	@echo "  $(VENV) is ready"

bench: $(STAMP)
	@echo "running toolbudget bench $(ARGS)"
	@$(BIN)/toolbudget bench $(ARGS)

# The test targets let Python write bytecode even where the environment sets
# PYTHONDONTWRITEBYTECODE=1 (this machine's does): otherwise every interpreter (both xdist workers,
# each child python a test starts) compiles budget/, spill/, benchmarks/ and tests/ from source on
# every run, and pytest rewrites every test module's asserts again, ~6 s of CPU a worker. An empty
# value turns it off; the .pyc files go to __pycache__/ beside the sources, which git ignores.
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=

# --dist loadgroup is meant to keep the tests of one xdist_group on one worker (the Ray tests).
# With pytest 9.2 and pytest-xdist 3.8 it does not: xdist still writes the group into the old
# item._nodeid field, which pytest 9.2 no longer reads, so every test is its own scope, handed out
# one by one (pytest-dev/pytest-xdist#1386, fix proposed in #1388). Nothing fails; grouping comes
# back with that fix.

test: $(STAMP)
	@echo "running the test suite (pytest -n 2)"
	@$(WRITE_BYTECODE) $(BIN)/pytest -n 2 --dist loadgroup -q $(ARGS)

# Everything but the tests marked slow (crash soak, perf smoke, large hypothesis runs, the docs'
# python blocks, each in a fresh interpreter), property tests at a fifth of their examples.
# CI runs `test`: every test at its full count. The fast lane holds no grouped test, so it uses
# --dist load, which hands tests out in chunks: side by side on the 2-core development machine
# (load 1.6-2.3, three pairs), 33.5 s median against 37.9 s with loadgroup's one-by-one handing
# out. That machine's speed moves by a quarter within minutes (the same run took 42-63 s of CPU):
# test-fast took 24.6-36.4 s there, under 30 s in its quieter minutes. Collection takes ~1 s a
# worker; the rest is the tests, and the SDKs both workers import to run theirs.
test-fast: $(STAMP)
	$(WRITE_BYTECODE) $(BIN)/pytest -n 2 --dist load -q -m "not slow" --hypothesis-profile=fast $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check budget spill benchmarks tests
	$(BIN)/ruff format --check budget spill benchmarks tests
	$(BIN)/mypy

# The documentation site, built strictly (any warning fails) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find budget spill benchmarks tests -name __pycache__ -type d -prune -exec rm -rf {} +
