"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The public recorded traces beside the checkout; skipped when absent, but required under CI."""
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the shared traces are missing at {SHARED_TRACES}")
        pytest.skip("../shared/traces is absent (a fresh clone without the public trace set)")
    return SHARED_TRACES.resolve()
