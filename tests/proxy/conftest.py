"""Fixtures for the proxy's tests: a recording stand-in upstream and the proxy, both on loopback.

The proxy's stack (starlette, uvicorn, httpx) comes from the ``proxy`` extra: the ``kit`` fixture
skips a test without it (fails it under CI) before anything imports it, so collecting these
modules never needs the extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from tests._ci import require_module

if TYPE_CHECKING:
    from tests.proxy._kit import Stack


@pytest.fixture
def kit() -> ModuleType:
    """tests/proxy/_kit.py, once the ``proxy`` extra is known to be installed."""
    for name in ("starlette", "uvicorn", "httpx"):
        require_module(name, extra="proxy")
    from tests.proxy import _kit

    return _kit


@pytest.fixture
def stack(kit: ModuleType, tmp_path: Path) -> Iterator[Stack]:
    """A stand-in upstream and a proxy forwarding to it, sessions under ``tmp_path/sessions``."""
    with kit.Stack(tmp_path / "sessions") as running:
        yield running
