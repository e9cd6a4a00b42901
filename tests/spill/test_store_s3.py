"""FsspecStore on a real S3 API (moto's server on loopback): what object storage adds to the contract.

Two writers racing for the next log object, resume from the listed sequence, missing and torn
log objects, the read-through cache, and S3 faults injected on the wire by a loopback proxy
(503 SlowDown, read timeouts, a lost reply whose retry meets a 412): botocore's retries absorb
them, nothing is lost, and a StoreError names the failure when the retries run out.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from budget._errors import SessionLocked, StoreError
from spill import FsspecStore, ref_for
from tests._faultproxy import Fault, FaultProxy, fault_proxy
from tests._s3 import MotoS3

BUCKET = "objects"


# moto on loopback and botocore retries take tens of seconds: the slow lane (make test, CI).
pytestmark = pytest.mark.slow


@pytest.fixture
def url(moto_s3: MotoS3) -> str:
    """A fresh session URL in a bucket of the loopback S3 server."""
    moto_s3.make_bucket(BUCKET)
    return f"s3://{BUCKET}/{secrets.token_hex(8)}/session"


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the loopback S3 server."""
    with fault_proxy(moto_s3.endpoint) as running:
        yield running


def _store(s3: MotoS3, url: str, tmp_path: Path, **extra: Any) -> FsspecStore:
    return FsspecStore(url, cache_dir=tmp_path / secrets.token_hex(4), **s3.options(**extra))


def _via(proxy: FaultProxy, s3: MotoS3, url: str, tmp_path: Path, **config: Any) -> FsspecStore:
    """A store whose requests go through ``proxy``, with botocore's retry config ``config``."""
    options = s3.options(endpoint_url=proxy.endpoint)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 3},
        "connect_timeout": 2,
        "read_timeout": 2,
        **config,
    }
    return FsspecStore(url, cache_dir=tmp_path / secrets.token_hex(4), **options)


def _is_put(key: str) -> Any:
    return lambda method, path: method == "PUT" and key in path


def test_second_writer_gets_session_locked(moto_s3: MotoS3, url: str, tmp_path: Path) -> None:
    """Two stores on one session race for the next log object: the second gets SessionLocked."""
    first = _store(moto_s3, url, tmp_path)
    second = _store(moto_s3, url, tmp_path)
    first.append_log([{"call_id": "a"}])
    with pytest.raises(SessionLocked, match="another writer"):
        second.append_log([{"call_id": "b"}])
    with pytest.raises(SessionLocked):  # its view of the sequence is stale: refused for good
        second.append_log([{"call_id": "c"}])
    first.append_log([{"call_id": "d"}])
    with _store(moto_s3, url, tmp_path) as third:
        assert third.read_log() == [{"call_id": "a"}, {"call_id": "d"}]
    first.close()
    second.close()


def test_a_second_budget_on_one_object_store_session_is_refused_not_silently_unlogged(
    moto_s3: MotoS3, url: str, tmp_path: Path
) -> None:
    """A Budget whose log append loses the race to another writer raises SessionLocked."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = Budget(_store(moto_s3, url, tmp_path))
    second = Budget(_store(moto_s3, url, tmp_path))
    first.prepare(messages)
    with pytest.raises(SessionLocked):
        second.prepare([*messages, {"role": "assistant", "content": "other"}])
    first.prepare([*messages, {"role": "assistant", "content": "ok"}])
    first.close()
    second._store.close()


def test_resume_on_another_machine_reads_bodies_and_log(
    moto_s3: MotoS3, url: str, tmp_path: Path
) -> None:
    """A store with an empty cache (another machine) reads every body and record, in order."""
    texts = [f"body {i} " * 1000 for i in range(5)]
    with _store(moto_s3, url, tmp_path) as store:
        refs = [store.put(text) for text in texts]
        for i, ref in enumerate(refs):
            store.append_log([{"call_id": f"toolu_{i}", "ref": ref}])
        store.write_meta({"format": "anthropic"})
    with _store(moto_s3, url, tmp_path) as again:
        assert [r["ref"] for r in again.read_log()] == refs
        assert [again.get(ref) for ref in refs] == texts
        assert again.read_meta() == {"format": "anthropic"}
        again.append_log([{"call_id": "next"}])
        assert again.read_log()[-1] == {"call_id": "next"}


def test_missing_log_object_is_skipped_with_an_event(
    moto_s3: MotoS3, url: str, tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A deleted log object is reported (toolbudget.log.object_missing); the others are read in order."""
    with _store(moto_s3, url, tmp_path) as store:
        for i in range(3):
            store.append_log([{"n": i}])
        store._objects.fs.rm_file(store._objects.log_key(1))
    with _store(moto_s3, url, tmp_path) as again:
        assert again.read_log() == [{"n": 0}, {"n": 2}]
        again.append_log([{"n": 3}])  # after the last one present, never into the gap
        assert again.read_log() == [{"n": 0}, {"n": 2}, {"n": 3}]
    missing = [e for e in logs if e["event"] == "toolbudget.log.object_missing"]
    assert missing and missing[0]["first"] == "log/000000000001.jsonl"


def test_torn_log_object_is_skipped_with_an_event(
    moto_s3: MotoS3, url: str, tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A log object cut short loses only its own damaged line; the next objects still count."""
    with _store(moto_s3, url, tmp_path) as store:
        store.append_log([{"n": 0}])
        store.append_log([{"n": 1}])
        store.append_log([{"n": 2}])
        whole = store._objects.fs.cat_file(store._objects.log_key(1))
        store._objects.fs.pipe_file(store._objects.log_key(1), whole[: len(whole) // 2])
        assert store.read_log() == [{"n": 0}, {"n": 2}]
    skipped = [e for e in logs if e["event"] == "toolbudget.log.line_skipped"]
    assert [e["line"] for e in skipped] == [2]


def test_read_through_cache_serves_and_heals(
    moto_s3: MotoS3, url: str, tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """A cached body is read without S3; a damaged cache entry is refetched and repaired."""
    cache = tmp_path / "cache"
    text = "cached body " * 500
    with FsspecStore(url, cache_dir=cache, **moto_s3.options()) as store:
        ref = store.put(text)
        entry = cache / f"{ref}.txt"
        assert entry.read_bytes() == text.encode()
        entry.write_bytes(b"damaged")
        assert store.get(ref) == text  # refetched: the entry's hash did not match
        assert entry.read_bytes() == text.encode()
        store._objects.fs.rm_file(store._objects.body_key(ref))
        assert store.get(ref) == text  # from the cache alone
    assert any(e["event"] == "toolbudget.spill.cache_corrupt" for e in logs)


def test_private_cache_is_removed_on_close(moto_s3: MotoS3, url: str) -> None:
    """Without cache_dir the store caches in a private temporary directory it removes on close."""
    store = FsspecStore(url, **moto_s3.options())
    store.put("x" * 100)
    cache = store._cache.path
    assert os.listdir(cache)
    store.close()
    assert not os.path.exists(cache)


def test_slowdown_is_retried_by_botocore_and_nothing_is_lost(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """Two 503 SlowDown answers to a body PUT and a log PUT are retried; both land once."""
    text = "slow " * 2000
    ref = ref_for(text)
    proxy.faults += [
        Fault("slowdown", _is_put(ref), times=2),
        Fault("slowdown", _is_put("/log/"), times=2),
    ]
    with _via(proxy, moto_s3, url, tmp_path) as store:
        assert store.put(text) == ref
        store.append_log([{"ref": ref}])
    assert [s for m, p, s in proxy.seen if m == "PUT" and ref in p] == [503, 503, 200]
    with _store(moto_s3, url, tmp_path) as again:
        assert again.get(ref) == text
        assert again.read_log() == [{"ref": ref}]


def test_read_timeout_is_retried(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """A reply slower than the read timeout is retried and the body still comes back."""
    with _store(moto_s3, url, tmp_path) as seed:
        ref = seed.put("timely " * 100)
    proxy.faults.append(Fault("delay", lambda m, p: m == "GET" and ref in p, times=1, seconds=3.0))
    with _via(proxy, moto_s3, url, tmp_path, read_timeout=1) as store:
        assert store.get(ref) == "timely " * 100
    assert len([p for m, p in proxy.arrived if m == "GET" and ref in p]) == 2


def test_lost_reply_then_412_on_own_append_is_success(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """A log PUT lands but its reply is lost; the retry meets a real 412: the append succeeded once."""
    proxy.faults.append(Fault("lost_reply", _is_put("/log/"), times=1))
    with _via(proxy, moto_s3, url, tmp_path) as store:
        store.append_log([{"call_id": "once"}])
        store.append_log([{"call_id": "twice"}])
    statuses = [s for m, p, s in proxy.seen if m == "PUT" and "/log/000000000000" in p]
    assert statuses == [500, 412]
    with _store(moto_s3, url, tmp_path) as again:
        assert again.read_log() == [{"call_id": "once"}, {"call_id": "twice"}]


def test_store_error_when_retries_run_out(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """SlowDown on every attempt: a StoreError naming the object and SlowDown; nothing logged."""
    proxy.faults.append(Fault("slowdown", _is_put("/log/"), times=100))
    with (
        _via(proxy, moto_s3, url, tmp_path) as store,
        pytest.raises(StoreError, match=r"log/000000000000\.jsonl.*\[SlowDown; no retry left\]"),
    ):
        store.append_log([{"n": 1}])
    assert len([p for m, p, s in proxy.seen if m == "PUT" and s == 503]) == 3
    proxy.faults.clear()
    with _store(moto_s3, url, tmp_path) as again:
        assert again.read_log() == []
        again.append_log([{"n": 1}])
        assert again.read_log() == [{"n": 1}]


def test_budget_open_chooses_the_object_store_by_url(
    moto_s3: MotoS3, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Budget.open("s3://...") spills to S3, and a second open resumes with byte-identical copies."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    big = "line of a big tool output\n" * 4000
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]},
    ]
    with Budget.open(url) as session:
        assert isinstance(session._store, FsspecStore)
        first = session.prepare(messages)
        assert first.report.spilled == 1
        ref = first.report.decisions[0].ref
        assert ref is not None
    with Budget.open(url) as again:
        assert again.prepare(messages).messages == first.messages
        assert again.read(ref) == big


def test_put_many_sends_the_batch_concurrently_and_every_ref_is_stored(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """A group commit of 12 new bodies has several PUTs in flight at once (each held 0.3 s by
    the proxy), each body is sent once, and every ref it returns is read back by a store with an
    empty cache."""
    texts = [f"batch body {i} " * 300 for i in range(12)]
    refs = [ref_for(text) for text in texts]
    proxy.faults += [Fault("delay", _is_put(ref), seconds=0.3) for ref in refs]
    with _via(proxy, moto_s3, url, tmp_path) as store:
        assert store.put_many([*texts, texts[0]]) == [*refs, refs[0]]
    assert [s for m, _, s in proxy.seen if m == "PUT"] == [200] * len(refs)  # the repeat: once
    assert proxy.peak > 1
    with _store(moto_s3, url, tmp_path) as again:
        assert [again.get(ref) for ref in refs] == texts


@pytest.mark.slow  # waits out botocore's backoff to the last attempt
def test_put_many_fails_only_the_body_whose_retries_run_out(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path
) -> None:
    """SlowDown on every attempt at one body of a batch: that body gets a StoreError naming
    SlowDown, the others are stored, and the quota count stays right for the next put."""
    texts = [f"kept {i} " * 200 for i in range(3)]
    doomed = "refused " * 200
    proxy.faults.append(Fault("slowdown", _is_put(ref_for(doomed)), times=100))
    with _via(proxy, moto_s3, url, tmp_path) as store:
        got = store.put_many([texts[0], doomed, texts[1], texts[2]])
        assert isinstance(got[1], StoreError)
        assert "SlowDown; no retry left" in str(got[1])
        assert [got[0], *got[2:]] == [ref_for(t) for t in texts]
        proxy.faults.clear()
        assert store.bodies_bytes == sum(len(t) for t in texts)
        assert store.put(doomed) == ref_for(doomed)
    with _store(moto_s3, url, tmp_path) as again:
        assert [again.get(ref_for(t)) for t in [*texts, doomed]] == [*texts, doomed]


def test_gc_removes_only_idle_object_store_sessions(
    moto_s3: MotoS3, tmp_path: Path, structlog_defaults: None, logs: list[dict[str, Any]]
) -> None:
    """FsspecStore.gc_sessions removes the sessions idle past the threshold (every object), keeps
    recent ones, and leaves a prefix holding foreign objects alone with a warning."""
    moto_s3.make_bucket(BUCKET)
    root = f"s3://{BUCKET}/gc-{secrets.token_hex(6)}"
    for name in ("old", "foreign"):
        with _store(moto_s3, f"{root}/{name}", tmp_path) as store:
            store.write_meta({"format": "anthropic"})
            store.append_log([{"call_id": name}])
            store.put(f"{name} body " * 100)
            if name == "foreign":
                store._objects.fs.pipe_file(store._objects.key("notes.txt"), b"not ours")
    kept: list[tuple[str, str]] = []
    options = moto_s3.options()
    assert FsspecStore.gc_sessions(root, older_than_s=3600, **options) == []
    removed = FsspecStore.gc_sessions(
        root,
        older_than_s=3600,
        now=time.time() + 7200,
        on_skip=lambda url, why: kept.append((url, why)),
        **options,
    )
    assert removed == [f"{root}/old"]
    assert kept == [(f"{root}/foreign", "holds objects a session does not: notes.txt")]
    with _store(moto_s3, f"{root}/old", tmp_path) as gone:
        assert gone.read_log() == [] and gone.read_meta() == {} and gone.bodies_bytes == 0
    with _store(moto_s3, f"{root}/foreign", tmp_path) as left:
        assert left.read_log() == [{"call_id": "foreign"}]
    assert [e["session"] for e in logs if e["event"] == "toolbudget.gc.removed"] == [f"{root}/old"]
    assert any(e["event"] == "toolbudget.gc.skipped" for e in logs)


@pytest.mark.slow  # waits out botocore's backoff to the last attempt
def test_a_spill_whose_put_gives_up_keeps_the_output_inline_and_resumes_identically(
    moto_s3: MotoS3, proxy: FaultProxy, url: str, tmp_path: Path, logs: list[dict[str, Any]]
) -> None:
    """SlowDown on every attempt at a body's PUT: the Budget keeps the output inline (frozen as
    kept_unspillable, a toolbudget.spill.failed event), and a resumed session, with S3 healthy
    again, sends the same bytes."""
    big = "a big tool output line\n" * 3000
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]},
    ]
    proxy.faults.append(Fault("slowdown", _is_put(ref_for(big)), times=100))
    with Budget(_via(proxy, moto_s3, url, tmp_path)) as session:
        first = session.prepare(messages)
    [decision] = first.report.decisions
    assert (decision.kind, decision.ref) == ("kept_unspillable", None)
    assert first.messages[2]["content"][0]["content"] == big
    assert any(e["event"] == "toolbudget.spill.failed" for e in logs)
    proxy.faults.clear()
    with Budget(_store(moto_s3, url, tmp_path)) as again:
        assert again.prepare(messages).messages == first.messages
