"""The installed ``toolbudget`` console script, for the CLI tests that run the real entry point."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._ci import in_ci

__all__ = ["entry_point", "run_toolbudget"]


def entry_point() -> Path:
    """The ``toolbudget`` script beside this interpreter, as pip generated it from
    pyproject.toml; skipped (a failure under CI) when it predates ``toolbudget.cli``."""
    script = Path(sys.executable).parent / "toolbudget"
    if not script.is_file() or "toolbudget.cli" not in script.read_text(encoding="utf-8"):
        why = f"{script} predates toolbudget.cli (reinstall: pip install -e .)"
        if in_ci():
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return script


def run_toolbudget(
    args: list[str],
    *,
    cwd: Path,
    pythonpath: str | None = None,
    timeout: float = 120,
    stdout: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``toolbudget ARGS`` in a subprocess; PYTHONPATH as given (else this checkout's root);
    standard output written to ``stdout`` when given (else captured); ``env`` added."""
    repo = Path(__file__).resolve().parents[1]
    path = pythonpath if pythonpath is not None else str(repo)
    env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    with contextlib.ExitStack() as stack:
        out = subprocess.PIPE if stdout is None else stack.enter_context(stdout.open("wb"))
        return subprocess.run(
            [str(entry_point()), *args],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
