"""Fixtures for the proxy's tests: a recording stand-in upstream and the proxy, both on loopback.

The proxy's stack (starlette, uvicorn, httpx) comes from the ``proxy`` extra. Without it these
modules are not collected (they import the proxy at the top), which the run's header says; under
CI they are collected anyway, so the missing extra fails the run. The ``kit`` fixture checks the
extra again for the tests that only import it when they run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from tests._ci import in_ci, require_module

if TYPE_CHECKING:
    from tests.proxy._kit import Stack


_STACK = ("starlette", "uvicorn", "httpx")
_MISSING = [name for name in _STACK if importlib.util.find_spec(name) is None]
collect_ignore_glob = ["test_*.py"] if _MISSING and not in_ci() else []


def pytest_report_header() -> str | None:
    """Say that the proxy's tests were left out, and why."""
    if not collect_ignore_glob:
        return None
    return f"tests/proxy not collected: {', '.join(_MISSING)} missing (pip install 'toolbudget[proxy]')"


@pytest.fixture
def kit() -> ModuleType:
    """tests/proxy/_kit.py, once the ``proxy`` extra is known to be installed."""
    for name in _STACK:
        require_module(name, extra="proxy")
    from tests.proxy import _kit

    return _kit


@pytest.fixture
def stack(kit: ModuleType, tmp_path: Path) -> Iterator[Stack]:
    """A stand-in upstream and a proxy forwarding to it, sessions under ``tmp_path/sessions``."""
    with kit.Stack(tmp_path / "sessions") as running:
        yield running
