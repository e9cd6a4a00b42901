"""``python -m benchmarks``: one typer app for every benchmark, loaded lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from benchmarks.cli import COMMANDS, app

REPO = Path(__file__).resolve().parents[2]


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run this interpreter from the repository root with ``args``."""
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_the_app_lists_every_benchmark() -> None:
    """``python -m benchmarks --help`` names every benchmark command."""
    done = _python("-m", "benchmarks", "--help")
    assert done.returncode == 0, done.stderr
    names = (
        "perf",
        "soak",
        "store-perf",
        "object-store",
        "proxy",
        "synthetic-shape",
        "throughput",
        "tokens",
    )
    for name in names:
        assert name in done.stdout
    assert set(COMMANDS) == set(names)


def test_the_module_aliases_run_their_command_alone() -> None:
    """``python -m benchmarks.store_perf --help`` is the store-perf command under its old name."""
    done = _python("-m", "benchmarks.store_perf", "--help")
    assert done.returncode == 0, done.stderr
    assert "python -m benchmarks.store_perf [OPTIONS]" in done.stdout
    assert "--repeat" in done.stdout


def test_the_object_store_alias_runs_its_command_alone() -> None:
    """``python -m benchmarks.object_store --help`` is the object-store command under its module."""
    done = _python("-m", "benchmarks.object_store", "--help")
    assert done.returncode == 0, done.stderr
    assert "python -m benchmarks.object_store [OPTIONS]" in done.stdout
    assert "--repeat" in done.stdout


def test_soak_bounds_are_checked_before_anything_runs() -> None:
    """A soak with no trials or too few rounds is a usage error (exit 2), not a silent run."""
    for args in (["--trials", "0"], ["--rounds", "7"], ["--kill", "never"]):
        result = CliRunner().invoke(app, ["soak", *args])
        assert result.exit_code == 2, (args, result.output)


def test_the_app_loads_no_benchmark_until_a_command_runs() -> None:
    """Importing the app loads no benchmark module: each command imports its own when run."""
    code = "import sys, benchmarks.cli; print(sorted(m for m in sys.modules if 'benchmarks' in m))"
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['benchmarks', 'benchmarks.cli']"
