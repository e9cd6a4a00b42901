"""The CI guards: what counts as CI, a missing prerequisite failing there, and the traces marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._ci import in_ci, require_dir, require_module

REPO = Path(__file__).resolve().parents[1]

TRACE_MODULES = [
    "tests/benchmarks/test_bench_traces.py",
    "tests/benchmarks/test_importers.py",
    "tests/benchmarks/test_perf_smoke.py",
    "tests/benchmarks/test_token_accuracy.py",
    "tests/budget/test_formats_openai_chat.py",
    "tests/budget/test_formats_openai_responses.py",
]
"""Every test module that reads ../shared/traces (through the ``shared_traces`` fixture)."""


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "1", "yes", "on", " true "])
def test_ci_set_to_a_true_value_is_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """CI=true, CI=True, CI=1, CI=yes (as services and people set it) all mean CI."""
    monkeypatch.setenv("CI", value)
    assert in_ci()


@pytest.mark.parametrize("value", [None, "", "0", "false", "False", "no", "off"])
def test_ci_unset_or_false_is_not_ci(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    """CI unset, empty, 0, false, no or off is a local run."""
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()


@pytest.mark.parametrize("value", ["1", "True", "yes", "true"])
def test_missing_shared_traces_fail_under_any_ci_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    """A missing traces directory is a failure, not a skip, whichever true value CI has."""
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"CI is set but .*absent"):
        require_dir(tmp_path / "absent", "absent for the test")


def test_missing_shared_traces_skip_outside_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Outside CI a missing traces directory skips, and a present one is returned resolved."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="absent for the test"):
        require_dir(tmp_path / "absent", "absent for the test")
    assert require_dir(tmp_path / "." / "", "unused") == tmp_path.resolve()


@pytest.mark.parametrize("value", ["1", "True", "true"])
def test_a_missing_framework_fails_under_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """An optional framework that is not installed fails the run under CI, naming its extra."""
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"no_such_framework_19 .*extra: nope"):
        require_module("no_such_framework_19", extra="nope")


def test_a_missing_framework_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside CI a missing framework skips its tests; an installed one is imported and returned."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"extra: nope"):
        require_module("no_such_framework_19", extra="nope")
    assert require_module("json", extra="none").dumps([]) == "[]"


def test_the_framework_tests_use_the_ci_guard_not_a_bare_importorskip() -> None:
    """No test module calls pytest.importorskip directly: it would skip silently under CI."""
    offenders = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "tests").rglob("*.py")
        if path.name not in ("_ci.py", "test_ci_guards.py")
        and "importorskip(" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_every_test_reading_the_shared_traces_is_marked(request: pytest.FixtureRequest) -> None:
    """In this run, each collected test that uses the shared_traces fixture carries ``traces``."""
    unmarked = [
        item.nodeid
        for item in request.session.items
        if "shared_traces" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("traces") is None
    ]
    assert unmarked == []


@pytest.mark.slow  # collects the six trace modules in a child pytest: the slowest fast-lane test
def test_not_traces_leaves_out_exactly_the_tests_that_read_them() -> None:
    """Collected with -m traces, each of the six modules contributes tests, and only trace tests."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
    run = subprocess.run(
        [*cmd, "-m", "traces", *TRACE_MODULES], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    selected = [line for line in run.stdout.splitlines() if "::" in line]
    assert {line.split("::")[0] for line in selected} == set(TRACE_MODULES)
    # The format modules mix trace tests with ordinary ones: only the trace tests are marked.
    chat = [line for line in selected if "test_formats_openai_chat" in line]
    assert chat == [
        "tests/budget/test_formats_openai_chat.py::test_a_recorded_gpt5_run_is_budgeted_turn_by_turn"
    ]
    assert not any("test_claude_code_handmade_session" in line for line in selected)
