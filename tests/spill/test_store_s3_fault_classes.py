"""The object store's fault suite by class (issue 31): every request of every store call meets,
in turn, a lost reply, a timeout after success and a 5xx, on moto's S3 behind a loopback proxy.

A lost reply: the request lands and a 500 comes back. A timeout after success: it lands and
the answer comes later than the client's read timeout. A 5xx: a 500 without the request
reaching S3. botocore retries each (3 attempts here); the call must then end as it would
without the fault, and a fresh store must read exactly what a clean run leaves. When every
attempt of a write meets the fault, the write raises StoreError, and once S3 is healthy the
session goes on with nothing lost, duplicated, or taken for another writer's.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from budget._errors import StoreError
from spill import FsspecStore, ref_for
from spill._objsnap import ROLLUP_OBJECTS
from tests._faultproxy import Fault, FaultProxy, fault_proxy
from tests._s3 import MotoS3

pytestmark = pytest.mark.slow  # moto, a proxy and botocore's backoff: the slow lane

BUCKET = "faults"
TEXT = "a body on object storage 中文 🎉\n" * 300
META = {"format": "anthropic", "requests": 3}
READ_TIMEOUT = 1.0
CLASSES = {
    "lost reply": Fault("lost_reply", lambda m, p: True),
    "timeout after success": Fault("late_reply", lambda m, p: True, seconds=READ_TIMEOUT + 0.8),
    "5xx": Fault("internal", lambda m, p: True),
}


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the loopback S3 server."""
    with fault_proxy(moto_s3.endpoint) as running:
        yield running


@dataclass
class Ctx:
    """One session for one run of a call: its URL, a direct store maker and a proxied one."""

    s3: MotoS3
    proxy: FaultProxy
    url: str
    tmp: Path

    def direct(self, url: str | None = None) -> FsspecStore:
        """A store reaching S3 directly, with a cache of its own (another machine)."""
        cache = self.tmp / secrets.token_hex(4)
        return FsspecStore(url or self.url, cache_dir=cache, **self.s3.options())

    def via(self) -> FsspecStore:
        """A store reaching S3 through the proxy: 3 attempts, a short read timeout."""
        options = self.s3.options(endpoint_url=self.proxy.endpoint)
        options["config_kwargs"] = {
            "retries": {"mode": "standard", "total_max_attempts": 3},
            "connect_timeout": 2,
            "read_timeout": READ_TIMEOUT,
        }
        return FsspecStore(self.url, cache_dir=self.tmp / secrets.token_hex(4), **options)


def _seed(ctx: Ctx, records: int = 2) -> None:
    with ctx.direct() as store:
        store.write_meta(META)
        store.put(TEXT)
        store.append_log([{"n": n} for n in range(records)])


@dataclass(frozen=True)
class Call:
    """A store call: its setup (no faults), the call (faults armed), and what must hold after."""

    setup: Callable[[Ctx], Any]
    run: Callable[[Ctx, Any], Any]
    check: Callable[[Ctx, Any], None]


def _opened(ctx: Ctx) -> FsspecStore:
    store = ctx.via()
    store.read_log()
    return store


def _check_log(expected: list[dict[str, Any]]) -> Callable[[Ctx, Any], None]:
    def check(ctx: Ctx, got: Any) -> None:
        with ctx.direct() as fresh:
            assert fresh.read_log() == expected

    return check


def _check_put(ctx: Ctx, got: Any) -> None:
    assert got in (ref_for(TEXT + "new"), [ref_for(TEXT + "new")])
    with ctx.direct() as fresh:
        assert fresh.get(ref_for(TEXT + "new")) == TEXT + "new"
        assert fresh.bodies_bytes == len((TEXT + TEXT + "new").encode())


def _gc_setup(ctx: Ctx) -> str:
    _seed(ctx)
    return ctx.url.rsplit("/", 1)[0]


def _gc_run(ctx: Ctx, root: str) -> list[str]:
    options = ctx.s3.options(endpoint_url=ctx.proxy.endpoint)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 3},
        "read_timeout": READ_TIMEOUT,
    }
    return FsspecStore.gc_sessions(root, older_than_s=60, now=time.time() + 3600, **options)


def _gc_check(ctx: Ctx, got: Any) -> None:
    assert got == [ctx.url]
    with ctx.direct() as gone:
        assert gone.read_log() == [] and gone.read_meta() == {} and gone.bodies_bytes == 0


def _rollup_setup(ctx: Ctx) -> FsspecStore:
    with ctx.direct() as writer:  # leaves a snapshot at ROLLUP_OBJECTS - 1
        for n in range(2 * ROLLUP_OBJECTS - 1):
            writer.append_log([{"n": n}])
    return _opened(ctx)


def _rollup_check(ctx: Ctx, got: Any) -> None:
    _check_log([{"n": n} for n in range(2 * ROLLUP_OBJECTS)])(ctx, got)
    with ctx.direct() as fresh:
        listing = fresh._log.scan()
        assert listing.snapshots == (ROLLUP_OBJECTS - 1, 2 * ROLLUP_OBJECTS - 1)
        assert min(listing.seqs) == ROLLUP_OBJECTS  # what the older snapshot covered: collected


def _seeded_open(ctx: Ctx) -> FsspecStore:
    _seed(ctx)
    return _opened(ctx)


def _seeded(ctx: Ctx) -> FsspecStore:
    _seed(ctx)
    return ctx.via()


def _open_and_read(ctx: Ctx, _: Any) -> list[dict[str, Any]]:
    with ctx.via() as store:
        return store.read_log()


def _equal(expected: Any) -> Callable[[Ctx, Any], None]:
    def check(ctx: Ctx, got: Any) -> None:
        assert got == expected

    return check


def _check_meta(ctx: Ctx, got: Any) -> None:
    with ctx.direct() as fresh:
        assert fresh.read_meta() == {**META, "requests": 4}


CALLS: dict[str, Call] = {
    "open": Call(_seed, _open_and_read, _check_log([{"n": 0}, {"n": 1}])),
    "put": Call(_seeded_open, lambda ctx, s: s.put(TEXT + "new"), _check_put),
    "put_many": Call(_seeded_open, lambda ctx, s: s.put_many([TEXT + "new"]), _check_put),
    "get": Call(_seeded_open, lambda ctx, s: s.get(ref_for(TEXT)), _equal(TEXT)),
    "has": Call(_seeded_open, lambda ctx, s: s.has(ref_for(TEXT)), _equal(True)),
    "append_log": Call(
        _seeded_open,
        lambda ctx, s: s.append_log([{"n": 2}]),
        _check_log([{"n": 0}, {"n": 1}, {"n": 2}]),
    ),
    "read_log": Call(_seeded, lambda ctx, s: s.read_log(), _equal([{"n": 0}, {"n": 1}])),
    "read_meta": Call(_seeded, lambda ctx, s: s.read_meta(), _equal(META)),
    "write_meta": Call(
        _seeded_open, lambda ctx, s: s.write_meta({**META, "requests": 4}), _check_meta
    ),
    "gc_sessions": Call(_gc_setup, _gc_run, _gc_check),
    "roll-up": Call(
        _rollup_setup,
        lambda ctx, s: s.append_log([{"n": 2 * ROLLUP_OBJECTS - 1}]),
        _rollup_check,
    ),
}


def _arm(proxy: FaultProxy, template: Fault, nth: int, *, times: int = 1) -> None:
    """Fault the ``nth`` request from now (0-based) ``times`` times: it and its retries."""
    counter = itertools.count()
    seen: set[int] = set()

    def match(method: str, path: str) -> bool:
        index = next(counter)
        if index >= nth and (index == nth or seen):
            seen.add(index)
            return True
        return False

    proxy.faults[:] = [Fault(template.kind, match, times=times, seconds=template.seconds)]


def _run(ctx: Ctx, call: Call, template: Fault | None, nth: int) -> int:
    """Run ``call`` once in a fresh session, its ``nth`` request faulted; the requests it made."""
    state = call.setup(ctx)
    ctx.proxy.faults.clear()
    before = len(ctx.proxy.arrived)
    if template is not None:
        _arm(ctx.proxy, template, nth)
    try:
        got = call.run(ctx, state)
    finally:
        ctx.proxy.faults.clear()
        if isinstance(state, FsspecStore):
            state.close()
    call.check(ctx, got)
    return len(ctx.proxy.arrived) - before


def _ctx(moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path) -> Callable[[], Ctx]:
    moto_s3.make_bucket(BUCKET)
    return lambda: Ctx(moto_s3, proxy, f"s3://{BUCKET}/{secrets.token_hex(8)}/s", tmp_path)


@pytest.mark.parametrize("fault", list(CLASSES))
@pytest.mark.parametrize("name", list(CALLS))
def test_every_request_of_every_call_survives_one_fault_of_each_class(
    moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path, name: str, fault: str
) -> None:
    """Each request the call makes, in turn, meets the fault once: the call ends as without
    it and a fresh store reads what a clean run leaves."""
    make = _ctx(moto_s3, proxy, tmp_path)
    requests = _run(make(), CALLS[name], None, 0)
    assert requests >= 1
    for nth in range(requests):
        _run(make(), CALLS[name], CLASSES[fault], nth)


@pytest.mark.parametrize("fault", list(CLASSES))
@pytest.mark.parametrize("name", ["put", "append_log", "write_meta"])
def test_a_write_whose_every_attempt_fails_raises_and_the_session_goes_on(
    moto_s3: MotoS3, proxy: FaultProxy, tmp_path: Path, name: str, fault: str
) -> None:
    """Every attempt of the write meets the fault: StoreError; once S3 is healthy the same
    write succeeds on the same store and a fresh store reads it exactly once."""
    ctx = _ctx(moto_s3, proxy, tmp_path)()
    call = CALLS[name]
    store = call.setup(ctx)
    _arm(proxy, CLASSES[fault], 0, times=100)
    with pytest.raises(StoreError, match="no retry left"):
        call.run(ctx, store)
    proxy.faults.clear()
    got = call.run(ctx, store)
    store.close()
    call.check(ctx, got)
