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
from spill._errors import StoreError
from tests._s3 import MotoS3

StoreFactory = Callable[..., Store]


class _LocalViaPutMany(LocalStore):
    """A LocalStore whose ``put`` is a group commit of one body: the contract run on put_many."""

    def put(self, text: str) -> str:
        [got] = self.put_many([text])
        if isinstance(got, StoreError):
            raise got
        return got


class _LocalViaPacks(_LocalViaPutMany):
    """A LocalStore that packs every group commit, even of one body: the contract run on packs."""

    _pack_min = 1


class _MemoryViaPutMany(MemoryStore):
    """A MemoryStore whose ``put`` goes through put_many, as :class:`_LocalViaPutMany`."""

    def put(self, text: str) -> str:
        [got] = self.put_many([text])
        if isinstance(got, StoreError):
            raise got
        return got


class _FsspecViaPutMany(FsspecStore):
    """An FsspecStore whose ``put`` goes through put_many, as :class:`_LocalViaPutMany`."""

    def put(self, text: str) -> str:
        [got] = self.put_many([text])
        if isinstance(got, StoreError):
            raise got
        return got


@pytest.fixture(
    params=[
        "local",
        "memory",
        "local-put_many",
        "local-packed",
        "memory-put_many",
        # Each pass over moto's loopback S3 costs tens of seconds: the slow lane (make test,
        # which CI runs) runs them; make test-fast keeps to the local and in-memory stores.
        pytest.param("s3", marks=pytest.mark.slow),
        pytest.param("s3-put_many", marks=pytest.mark.slow),
    ]
)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores of one kind (LocalStore under tmp_path, MemoryStore, or
    FsspecStore on moto's S3 server on loopback), whose ``put`` is their own, (``-put_many``)
    a group commit of one body through put_many, or (``local-packed``) that body in a pack."""
    opened: list[Store] = []
    counter = iter(range(1_000_000))
    many = request.param.endswith("-put_many")
    s3: MotoS3 | None = None
    bucket = ""
    if request.param.startswith("s3"):
        s3 = request.getfixturevalue("moto_s3")
        bucket = s3.make_bucket("contract")
    prefix = secrets.token_hex(8)

    def factory(**kwargs: Any) -> Store:
        store: Store
        if request.param.startswith("local"):
            local = {"local": LocalStore, "local-packed": _LocalViaPacks}.get(
                request.param, _LocalViaPutMany
            )
            store = local(tmp_path / f"session-{next(counter)}", **kwargs)
        elif s3 is not None:
            kwargs.pop("fsync", None)
            url = f"s3://{bucket}/{prefix}/session-{next(counter)}"
            remote = _FsspecViaPutMany if many else FsspecStore
            store = remote(url, cache_dir=tmp_path / "cache", **kwargs, **s3.options())
        else:
            kwargs.pop("fsync", None)
            store = (_MemoryViaPutMany if many else MemoryStore)(**kwargs)
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
