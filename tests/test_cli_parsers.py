"""Every number the command line and the environment take is parsed by what checks it.

The defect class: a check that accepts what the conversion then refuses (``str.isdigit`` takes
"²", ``float`` does not), so a malformed value gives a traceback instead of a usage error. Each
parser is tried with the Unicode digits and number words that trip such checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import Budget, BudgetConfig
from budget._errors import ConfigError
from budget._typer import duration as _duration

ROOT = Path(__file__).resolve().parents[1]

# Characters str.isdigit (or a Unicode \d) accepts that float() refuses or reads another way.
TRICKY = [
    "²d",
    "³h",
    "①",
    "①d",
    "٣d",
    "５m",
    "1²d",
    "½d",
    "1_0d",
    " 7d",
    "7d ",
    "7 d",
    "+7d",
    "-7d",
]
NOT_FINITE = ["nan", "inf", "-inf", "infinity", "1e999"]


def _toolbudget(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``toolbudget`` entry point in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", "from budget.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )


def _old_session(root: Path) -> Path:
    with Budget.open(root / "old") as b:
        b.prepare([{"role": "user", "content": "hi"}], now=0)
    past = time.time() - 30 * 86400
    os.utime(root / "old", (past, past))
    return root / "old"


@pytest.mark.parametrize("text", ["²d", "①", "nan", ""])
def test_a_malformed_duration_is_a_usage_error_and_removes_nothing(
    text: str, tmp_path: Path
) -> None:
    """gc --older-than with a malformed age exits 2 with one usage error and removes nothing."""
    old = _old_session(tmp_path)
    out = _toolbudget("gc", str(tmp_path), "--older-than", text)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "is not a duration" in out.stderr
    assert old.is_dir()


@pytest.mark.parametrize("text", [*TRICKY, *NOT_FINITE, "5", "1e3s", "7w", "d"])
def test_every_malformed_duration_is_refused_in_process(text: str, tmp_path: Path) -> None:
    """The same through typer's runner, for every tricky form: exit 2, nothing removed."""
    from typer.testing import CliRunner

    from budget.cli import app

    old = _old_session(tmp_path)
    out = CliRunner().invoke(app, ["gc", str(tmp_path), "--older-than", text])
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert old.is_dir()


def test_a_bare_zero_is_a_duration(tmp_path: Path) -> None:
    """gc --older-than 0 is accepted like 0s (zero needs no unit) and collects idle sessions."""
    with Budget.open(tmp_path / "idle") as b:
        b.prepare([{"role": "user", "content": "hi"}], now=0)
    past = time.time() - 60
    for entry in [tmp_path / "idle", *(tmp_path / "idle").rglob("*")]:
        os.utime(entry, (past, past))
    out = _toolbudget("gc", str(tmp_path), "--older-than", "0")
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "idle").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=6))
def test_the_duration_parser_raises_only_usage_errors(text: str) -> None:
    """Any text is a number of seconds or a usage error, never another exception."""
    import typer

    try:
        seconds = _duration(text)
    except typer.BadParameter:
        return
    assert seconds >= 0
    assert text.isascii()


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("0s", 0), ("30m", 1800), ("1.5h", 5400), (".5d", 43200)]
)
def test_well_formed_durations(text: str, seconds: float) -> None:
    """The forms the help shows, with decimals, give their seconds."""
    assert _duration(text) == seconds


def _float_fields() -> list[str]:
    out = []
    for name, info in BudgetConfig.model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        flat = [typing.get_args(a)[0] if typing.get_args(a) else a for a in args]
        if float in flat:
            out.append(name)
    return out


@pytest.mark.parametrize("name", _float_fields())
@pytest.mark.parametrize("value", NOT_FINITE)
def test_no_float_setting_takes_a_value_that_is_not_finite(name: str, value: str) -> None:
    """Every float setting refuses nan and infinities, from the environment and as an argument."""
    env = f"TOOLBUDGET_{name.upper()}"
    os.environ[env] = value
    try:
        with pytest.raises(ConfigError, match=env):
            BudgetConfig()
    finally:
        del os.environ[env]
    with pytest.raises(ConfigError, match=name):
        BudgetConfig(**{name: float(value)})


def test_a_summary_timeout_past_what_threads_can_wait_is_refused() -> None:
    """compact_timeout_s above threading.TIMEOUT_MAX is refused when the settings are built."""
    import threading

    with pytest.raises(ConfigError, match="compact_timeout_s"):
        BudgetConfig(compact_timeout_s=threading.TIMEOUT_MAX * 2)
    assert BudgetConfig(compact_timeout_s=threading.TIMEOUT_MAX).compact_timeout_s


@pytest.mark.parametrize("value", ["²", "٣٠٠٠", "1e3", "inf", "banana"])
def test_an_integer_setting_from_the_environment_is_checked_as_it_is_read(value: str) -> None:
    """An integer setting given a Unicode digit or a float word is a ConfigError naming it."""
    os.environ["TOOLBUDGET_RESULT_CAP"] = value
    try:
        with pytest.raises(ConfigError, match="TOOLBUDGET_RESULT_CAP"):
            BudgetConfig()
    finally:
        del os.environ["TOOLBUDGET_RESULT_CAP"]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["bench", "--help"],
        ["gc", "--help"],
        ["read", "--help"],
        ["traces", "fetch", "--help"],
    ],
)
def test_help_screens_show_no_type_beside_a_flag(args: list[str]) -> None:
    """No help screen of the real entry point shows ``<bool>`` (a flag takes no value), and the
    options that take one still show their type."""
    out = _toolbudget(*args, env={"COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    assert "--help" in out.stdout
    assert "<bool>" not in out.stdout
    if args[0] == "bench":
        assert "<path>" in out.stdout and "--wide" in out.stdout


def test_benchmark_help_screens_show_no_type_beside_a_flag() -> None:
    """``python -m benchmarks`` and a benchmark run alone show no ``<bool>`` either."""
    for module, extra in (("benchmarks", ["perf"]), ("benchmarks.soak", [])):
        out = subprocess.run(
            [sys.executable, "-m", module, *extra, "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"},
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "<bool>" not in out.stdout
        assert "--help" in out.stdout
