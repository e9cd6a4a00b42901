"""The fast and the full test lanes: what each runs, and with which plugins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._lanes import FAST_EXAMPLES, FULL_EXAMPLES, scaled

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def _recipe(target: str) -> str:
    """The command lines of a Makefile target."""
    text = MAKEFILE.read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, flags=re.M)
    assert found, f"no {target} target in the Makefile"
    return found.group(1)


def test_fast_profile_runs_a_fifth_of_each_property_tests_examples() -> None:
    """A property test written for 60 examples runs 60 in the full lane and 12 in the fast one;
    none runs fewer than 10."""
    assert FAST_EXAMPLES * 5 == FULL_EXAMPLES
    assert scaled(60, FULL_EXAMPLES) == 60
    assert scaled(300, FULL_EXAMPLES) == 300
    assert scaled(60, FAST_EXAMPLES) == 12
    assert scaled(15, FAST_EXAMPLES) == 10


def test_make_test_fast_skips_slow_tests_with_the_fast_profile_and_make_test_runs_all() -> None:
    """``make test-fast`` deselects ``slow`` and loads the fast profile; ``make test`` (CI) does
    neither, so it runs every test at its full count."""
    fast, full = _recipe("test-fast"), _recipe("test")
    assert '-m "not slow"' in fast and "--hypothesis-profile=fast" in fast
    assert "-m " not in full and "--hypothesis-profile" not in full


def test_only_the_plugins_the_suite_needs_are_loaded(request: pytest.FixtureRequest) -> None:
    """Autoload is off: xdist and hypothesis are named, langsmith's and anyio's plugins (installed
    with langchain and the SDKs, and each costing seconds in every worker) are not loaded."""
    plugins = request.config.pluginmanager
    assert plugins.has_plugin("xdist.plugin") and plugins.has_plugin("_hypothesis_pytestplugin")
    assert not plugins.has_plugin("langsmith_plugin")
    assert not plugins.has_plugin("anyio")


def test_both_test_targets_let_python_write_bytecode() -> None:
    """``make test`` and ``make test-fast`` clear PYTHONDONTWRITEBYTECODE (set to 1 on this
    machine), so workers and child interpreters reuse compiled modules instead of compiling all."""
    text = MAKEFILE.read_text(encoding="utf-8")
    assert re.search(r"^WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=$", text, flags=re.M)
    for target in ("test", "test-fast"):
        pytest_line = next(line for line in _recipe(target).splitlines() if "/pytest " in line)
        assert pytest_line.lstrip("\t@").startswith("$(WRITE_BYTECODE) "), pytest_line
