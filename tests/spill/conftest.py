"""Fixtures for the spill store tests: one factory per store kind, so contract tests run on both."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from spill import FsspecStore, LocalStore, MemoryStore, Store, _fs
from tests._s3 import MotoS3

StoreFactory = Callable[..., Store]


@pytest.fixture(params=["local", "memory", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores of one kind (LocalStore under tmp_path, MemoryStore, or
    FsspecStore on moto's S3 server on loopback)."""
    opened: list[Store] = []
    counter = iter(range(1_000_000))
    s3: MotoS3 | None = None
    if request.param == "s3":
        s3 = request.getfixturevalue("moto_s3")
        bucket = s3.make_bucket("contract")
    prefix = secrets.token_hex(8)

    def factory(**kwargs: Any) -> Store:
        store: Store
        if request.param == "local":
            store = LocalStore(tmp_path / f"session-{next(counter)}", **kwargs)
        elif s3 is not None:
            kwargs.pop("fsync", None)
            url = f"s3://{bucket}/{prefix}/session-{next(counter)}"
            store = FsspecStore(url, cache_dir=tmp_path / "cache", **kwargs, **s3.options())
        else:
            kwargs.pop("fsync", None)
            store = MemoryStore(**kwargs)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    """structlog events emitted during the test, as dicts."""
    with capture_logs() as captured:
        yield cast(list[dict[str, Any]], captured)


@pytest.fixture
def no_umask() -> Iterator[None]:
    """Run with umask 0, so the modes the store sets cannot come from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def fs_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Every spill filesystem call made during the test, as (kind, args); calls still run."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for name in _fs.OPS:
        real = getattr(_fs, name)

        def recorded(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append((_name, args))
            return _real(*args, **kwargs)

        monkeypatch.setattr(_fs, name, recorded)
    return calls
