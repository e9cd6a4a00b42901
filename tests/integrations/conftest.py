"""Fixtures for the framework integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations._agentkit import write_big_file


@pytest.fixture
def big_file(tmp_path: Path) -> tuple[Path, str]:
    """A big log-like file under tmp_path and its text."""
    path = tmp_path / "data" / "service.log"
    path.parent.mkdir()
    return path, write_big_file(path)
