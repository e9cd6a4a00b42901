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

# Both lanes run on two workers with --dist loadgroup, which tests/conftest.py hands to
# tests/_lanes.py's GroupedScheduling: a test module is one unit of work, and every module that
# imports a framework SDK goes to the same worker, so the other never pays those ~6 s of imports.
# (xdist's own loadgroup, with pytest 9.2 and pytest-xdist 3.8, ignores the xdist_group marks and
# hands tests out one by one: pytest-dev/pytest-xdist#1386.)

test: $(STAMP)
	@echo "running the test suite (pytest -n 2)"
	@$(WRITE_BYTECODE) $(BIN)/pytest -n 2 --dist loadgroup -q $(ARGS)

# Everything but the tests marked slow (crash soak, perf smoke, large hypothesis runs, the docs'
# python blocks, each in a fresh interpreter), property tests at a fifth of their examples.
# CI runs `test`: every test at its full count.
test-fast: $(STAMP)
	$(WRITE_BYTECODE) $(BIN)/pytest -n 2 --dist loadgroup -q -m "not slow" --hypothesis-profile=fast $(ARGS)

# The import contracts (pyproject.toml's [tool.importlinter]) are checked on this checkout's
# packages: PYTHONPATH puts them first, whichever checkout the venv was installed from.
lint: $(STAMP)
	$(BIN)/ruff check toolbudget budget spill benchmarks tests
	$(BIN)/ruff format --check toolbudget budget spill benchmarks tests
	$(BIN)/mypy
	PYTHONPATH=. $(BIN)/lint-imports --no-cache

# The documentation site, built strictly (any warning fails) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find budget spill benchmarks tests -name __pycache__ -type d -prune -exec rm -rf {} +
