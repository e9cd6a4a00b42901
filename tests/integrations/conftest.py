"""Fixtures for the framework integration tests.

Each framework is imported by the tests that use it, never when a test module is collected
(tests/test_structure.py checks it): both xdist workers collect every module, and the frameworks
cost seconds to import. A module's tests name their framework's ``needs_*`` fixture, which skips
them when the extra is missing, or fails them under CI, before any of them imports it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._ci import require_module
from tests.integrations._agentkit import write_big_file


@pytest.fixture
def big_file(tmp_path: Path) -> tuple[Path, str]:
    """A big log-like file under tmp_path and its text."""
    path = tmp_path / "data" / "service.log"
    path.parent.mkdir()
    return path, write_big_file(path)


@pytest.fixture
def needs_langchain() -> None:
    """LangChain v1 (``langchain.agents``), from the ``langchain`` extra."""
    require_module("langchain.agents", extra="langchain")


@pytest.fixture
def needs_openai_agents() -> None:
    """The OpenAI Agents SDK (``agents``), from the ``openai-agents`` extra."""
    require_module("agents", extra="openai-agents")


@pytest.fixture
def needs_pydantic_ai() -> None:
    """pydantic-ai (``pydantic_ai``), from the ``pydantic-ai`` extra."""
    require_module("pydantic_ai", extra="pydantic-ai")
