"""Issue 31's five object-store defects, each on a real S3 API (moto's server on loopback).

A name a user chose is never a glob pattern (gc, resume); a cache shared by two sessions never
answers one with the other's body; a missing bucket refuses the open; a log append whose reply
was lost is recognised as the store's own by the next append, not taken for another writer.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budget import Budget
from budget._errors import RefError, StoreError
from spill import FsspecStore
from tests._faultproxy import Fault, FaultProxy, fault_proxy
from tests._s3 import MotoS3

BUCKET = "issue31"

# moto on loopback and botocore's retries: the slow lane (make test, CI), as test_store_s3.
pytestmark = pytest.mark.slow


@pytest.fixture
def root(moto_s3: MotoS3) -> str:
    """A fresh prefix in a bucket of the loopback S3 server."""
    moto_s3.make_bucket(BUCKET)
    return f"s3://{BUCKET}/{secrets.token_hex(8)}"


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the loopback S3 server."""
    with fault_proxy(moto_s3.endpoint) as running:
        yield running


def _store(s3: MotoS3, url: str, cache: Path, **options: Any) -> FsspecStore:
    return FsspecStore(url, cache_dir=cache, **s3.options(**options))


def _session(s3: MotoS3, url: str, cache: Path, name: str) -> None:
    """A small session at ``url``: metadata, a body and a log record naming it."""
    with _store(s3, url, cache) as store:
        store.write_meta({"name": name})
        ref = store.put(f"the body of {name} " * 50)
        store.append_log([{"call_id": name, "ref": ref}])


def test_gc_of_sessions_named_like_patterns_leaves_the_sessions_they_match(
    moto_s3: MotoS3, root: str, tmp_path: Path
) -> None:
    """Collecting expired sessions named ``run[1]`` and ``a?`` deletes nothing of the live
    sessions ``run1`` and ``ab`` that those names match as glob patterns."""
    for name in ("run[1]", "a?"):
        _session(moto_s3, f"{root}/{name}", tmp_path / "c", name)
    time.sleep(3)  # S3's LastModified has whole seconds: the live ones are clearly younger
    for name in ("run1", "ab"):
        _session(moto_s3, f"{root}/{name}", tmp_path / "c", name)
    removed = FsspecStore.gc_sessions(root, older_than_s=2, **moto_s3.options())
    assert removed == [f"{root}/a?", f"{root}/run[1]"]
    for name in ("run1", "ab"):
        with _store(moto_s3, f"{root}/{name}", tmp_path / "fresh") as live:
            [record] = live.read_log()
            assert record["call_id"] == name
            assert live.read_meta() == {"name": name}
            assert live.get(record["ref"]) == f"the body of {name} " * 50


def test_a_session_whose_url_holds_glob_characters_resumes_its_own_log(
    moto_s3: MotoS3, root: str, tmp_path: Path
) -> None:
    """A session at ``.../run[1]`` resumes its own records, not those of ``.../run1``, which
    its name matches as a glob pattern."""
    _session(moto_s3, f"{root}/run1", tmp_path / "c", "run1")
    _session(moto_s3, f"{root}/run[1]", tmp_path / "c", "run[1]")
    with _store(moto_s3, f"{root}/run[1]", tmp_path / "fresh") as store:
        assert [r["call_id"] for r in store.read_log()] == ["run[1]"]


def test_a_shared_cache_dir_never_answers_a_ref_the_session_does_not_hold(
    moto_s3: MotoS3, root: str, tmp_path: Path
) -> None:
    """Session Y, sharing session X's cache_dir, refuses X's ref: ``get`` and ``Budget.read``
    raise RefError and Y's read-back tool answers ``Error:``, though the cache holds the body."""
    cache = tmp_path / "shared-cache"
    secret = "only session X holds this " * 100
    with _store(moto_s3, f"{root}/x", cache) as x:
        ref = x.put(secret)
    assert (cache / f"{ref}.txt").exists()
    with _store(moto_s3, f"{root}/y", cache) as y:
        with pytest.raises(RefError, match="no body is stored"):
            y.get(ref)
        session = Budget(y)
        with pytest.raises(RefError):
            session.read(ref)
        answer = session.handle_read_tool({"ref": ref})
        assert answer.startswith("Error:") and secret[:20] not in answer
    with _store(moto_s3, f"{root}/x", cache) as again:  # X itself is still served
        assert again.get(ref) == secret


def test_opening_a_session_in_a_missing_bucket_fails_naming_the_bucket(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Budget.open("s3://<missing bucket>/s")`` raises a StoreError that names the bucket,
    instead of a session whose every spill is lost."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"no-such-bucket-{secrets.token_hex(4)}"
    with pytest.raises(StoreError, match=rf"{bucket}.*bucket does not exist"):
        Budget.open(f"s3://{bucket}/sessions/s")


def _lost_log_replies(proxy: FaultProxy, times: int) -> None:
    """The next ``times`` log PUTs land but their replies are lost (a 500 in their place)."""
    proxy.faults.append(
        Fault("lost_reply", lambda method, path: method == "PUT" and "/log/" in path, times)
    )


def _via(proxy: FaultProxy, s3: MotoS3, url: str, cache: Path) -> FsspecStore:
    """A store reaching S3 through ``proxy``, with 3 attempts per request and short backoff."""
    options = s3.options(endpoint_url=proxy.endpoint)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 3},
        "connect_timeout": 2,
        "read_timeout": 2,
    }
    return FsspecStore(url, cache_dir=cache, **options)


def test_an_append_whose_every_reply_was_lost_is_recognised_by_the_next_append(
    moto_s3: MotoS3, proxy: FaultProxy, root: str, tmp_path: Path
) -> None:
    """A log append lands but every attempt's reply is lost (StoreError); the next append, which
    re-sends those records with new ones, finds its own object and goes on: no SessionLocked,
    every record once."""
    url = f"{root}/s"
    _lost_log_replies(proxy, times=3)
    with _via(proxy, moto_s3, url, tmp_path / "c") as store:
        with pytest.raises(StoreError, match="no retry left"):
            store.append_log([{"n": 1}])
        store.append_log([{"n": 1}, {"n": 2}])
        store.append_log([{"n": 3}])
    with _store(moto_s3, url, tmp_path / "fresh") as again:
        assert again.read_log() == [{"n": 1}, {"n": 2}, {"n": 3}]
        assert again._log.scan().seqs == (0, 1, 2)


def test_a_budget_whose_log_append_lost_its_reply_carries_on(
    moto_s3: MotoS3, proxy: FaultProxy, root: str, tmp_path: Path
) -> None:
    """A Budget whose append landed with its reply lost keeps the records, and the next
    prepare() and close() succeed (before issue 31 both raised SessionLocked); a resume shows
    every request."""
    url = f"{root}/budget"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    _lost_log_replies(proxy, times=3)
    session = Budget(_via(proxy, moto_s3, url, tmp_path / "c"))
    session.prepare(messages)
    messages.append({"role": "assistant", "content": "ok"})
    messages.append({"role": "user", "content": "again"})
    session.prepare(messages)
    session.close()
    with _store(moto_s3, url, tmp_path / "fresh") as again:
        requests = [r for r in again.read_log() if r.get("t") == "req"]
    assert len(requests) == 2
