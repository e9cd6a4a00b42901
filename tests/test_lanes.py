"""The fast and the full test lanes: what each runs, and with which plugins."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests._collect_probe import HEAVY_SDKS
from tests._lanes import (
    FAST_EXAMPLES,
    FULL_EXAMPLES,
    HUNT_EXAMPLES,
    SDK_GROUP,
    SDK_MODULES,
    SDK_PACKAGES,
    at_least,
    scaled,
    sdk_import_error,
    unit_of,
)

REPO = Path(__file__).resolve().parents[1]
MAKEFILE = REPO / "Makefile"


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


def test_the_hunt_profile_runs_every_property_test_at_least_its_count() -> None:
    """Under ``--hypothesis-profile=hunt`` a property test written for 60 or 300 examples runs
    the hunt's 5,000 (it ran its own count, the hunt reaching only the fuzz tests)."""
    assert scaled(60, HUNT_EXAMPLES) == HUNT_EXAMPLES
    assert scaled(9_000, HUNT_EXAMPLES) == 9_000


def test_the_hunt_profile_raises_the_fuzz_tests_examples_and_no_setting_warns() -> None:
    """``--hypothesis-profile=hunt`` gives the full-lane-only fuzz tests its 5,000 examples
    (their own 150 otherwise), with no ``TOOLBUDGET_*`` variable a session would warn about."""
    was = settings.get_current_profile_name()
    try:
        settings.load_profile("hunt")  # registered by tests/conftest.py, as the option loads it
        hunt = at_least(150)
        settings.load_profile("default")
        default = at_least(150)
    finally:
        settings.load_profile(was)
    assert (hunt, default) == (HUNT_EXAMPLES, 150)
    assert "TOOLBUDGET_" not in (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")


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


def test_both_test_targets_hand_work_out_with_loadgroup() -> None:
    """``make test`` and ``make test-fast`` run two workers with ``--dist loadgroup``, the mode
    tests/conftest.py gives to ``tests._lanes.GroupedScheduling``."""
    for target in ("test", "test-fast"):
        assert "-n 2 --dist loadgroup " in _recipe(target), target


def test_every_sdk_module_is_a_test_module_of_the_suite() -> None:
    """Each entry of ``SDK_MODULES`` names a test module that exists, by its path from the repo."""
    for module in SDK_MODULES:
        path = REPO / module
        assert path.is_file() and path.name.startswith("test_"), module


def test_grouped_scheduling_makes_a_module_a_unit_and_the_sdk_modules_one() -> None:
    """A test's unit of work is its module; every SDK module's tests share one unit; an xdist
    group suffix wins; an ``@`` inside a parametrize id is no group."""
    split = unit_of
    sdk = sorted(SDK_MODULES)
    assert split(f"{sdk[0]}::test_a") == split(f"{sdk[-1]}::test_b[x]") == SDK_GROUP
    assert split("tests/spill/test_store_gc.py::test_a") == "tests/spill/test_store_gc.py"
    assert split("tests/spill/test_store_gc.py::Cls::test_a[1]") == "tests/spill/test_store_gc.py"
    assert split("tests/benchmarks/test_engines.py::test_a@ray") == "ray"
    assert split("tests/spill/test_store_gc.py::test_a[a@b]") == "tests/spill/test_store_gc.py"


def test_an_sdk_import_outside_the_sdk_modules_is_an_error_naming_the_module() -> None:
    """A test outside ``SDK_MODULES`` that imported an SDK gets an error naming the module to add;
    an SDK module, or a test that imported nothing new, gets none."""
    error = sdk_import_error("tests/spill/test_store_gc.py::test_a", frozenset({"openai"}))
    assert error is not None
    assert "openai" in error and "add tests/spill/test_store_gc.py to SDK_MODULES" in error
    assert sdk_import_error(f"{min(SDK_MODULES)}::test_a", frozenset({"openai"})) is None
    assert sdk_import_error("tests/spill/test_store_gc.py::test_a", frozenset()) is None


@pytest.mark.slow
def test_loadgroup_runs_every_sdk_module_on_one_worker() -> None:
    """Two SDK modules and two others under ``-n 2 --dist loadgroup``: the SDK modules' tests all
    run on one worker, and the run uses both."""
    sdk = ["tests/budget/test_usage.py", "tests/budget/test_tokens.py"]
    others = ["tests/budget/test_envelope.py", "tests/spill/test_store_gc.py"]
    assert set(sdk) <= SDK_MODULES
    options = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--hypothesis-profile=fast", *sdk, *others],
        cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3_000:] + done.stderr[-2_000:]
    ran = re.findall(r"^\[(gw\d)\] .*?PASSED (\S+?)::", done.stdout, flags=re.M)
    assert {module for _, module in ran} == {*sdk, *others}
    workers = {module: {w for w, m in ran if m == module} for module in {*sdk, *others}}
    sdk_workers = set().union(*(workers[m] for m in sdk))
    assert len(sdk_workers) == 1, workers
    assert {w for w, _ in ran} == {"gw0", "gw1"}, workers


def test_the_sdks_kept_on_one_worker_are_among_the_heavy_imports() -> None:
    """Every package of ``SDK_PACKAGES`` is one of the heavy imports no test module may import at
    its top (``HEAVY_SDKS``)."""
    assert SDK_PACKAGES <= HEAVY_SDKS


@pytest.mark.parametrize("name", ["default", "fast", "hunt"])
def test_no_profile_times_an_example(name: str) -> None:
    """Every lane's profile runs examples without hypothesis's 200 ms deadline or its "too slow"
    check: on a loaded 2-core machine an example can take longer, and a timed unit test is flaky."""
    profile = settings.get_profile(name)
    assert profile.deadline is None and HealthCheck.too_slow in profile.suppress_health_check
