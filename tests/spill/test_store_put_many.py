"""put_many: a group commit of many bodies, each durable or failed on its own."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from budget._errors import QuotaExceeded, StoreError
from spill import LocalStore, MemoryStore, Store, _fs, ref_for
from tests.fsyncs import count_fsyncs

StoreFactory = Callable[..., Store]


def test_put_many_returns_each_ref_in_order_and_stores_duplicates_once(
    make_store: StoreFactory,
) -> None:
    """Every text gets its own ref in order, a repeated text the same ref, and its bytes
    count once toward the quota."""
    store = make_store(quota_bytes=30)
    texts = ["alpha body", "beta body!", "alpha body", "gamma bod"]
    got = store.put_many(texts)
    assert got == [ref_for(t) for t in texts]
    for text in texts:
        assert store.get(ref_for(text)) == text
    # 10 + 10 + 9 bytes stored: one more byte fits, two do not.
    [over] = store.put_many(["xy"])
    assert isinstance(over, QuotaExceeded)
    assert store.put_many(["x"]) == [ref_for("x")]


def test_put_many_fails_only_the_bodies_over_the_quota(make_store: StoreFactory) -> None:
    """A body that would pass the quota gets QuotaExceeded; those before and after it that fit
    are stored, checked in order against the running total."""
    store = make_store(quota_bytes=10)
    first, second, third = store.put_many(["12345", "123456", "1234"])
    assert first == ref_for("12345")
    assert isinstance(second, QuotaExceeded)
    assert "quota of 10 bytes" in str(second)
    assert third == ref_for("1234")
    assert not store.has(ref_for("123456"))


def test_put_many_refuses_non_text_and_a_closed_store_whole(make_store: StoreFactory) -> None:
    """A body that is not a str, a bare str instead of a list, or a closed store raise
    StoreError for the whole call, storing nothing."""
    store = make_store()
    with pytest.raises(StoreError, match="str bodies"):
        store.put_many(["fine", b"raw"])  # type: ignore[list-item]
    assert not store.has(ref_for("fine"))
    with pytest.raises(StoreError, match="sequence"):
        store.put_many("not a list")
    assert store.put_many([]) == []
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.put_many(["after"])


def _fail_write_of(monkeypatch: pytest.MonkeyPatch, needle: bytes, errno_: int = 28) -> list[bytes]:
    """Make ``_fs.write`` fail with ``errno_`` for data holding ``needle``; return the failed."""
    real = _fs.write
    failed: list[bytes] = []

    def write(fd: int, data: bytes | memoryview) -> None:
        if needle in bytes(data):
            failed.append(bytes(data))
            raise OSError(errno_, os.strerror(errno_))
        real(fd, data)

    monkeypatch.setattr(_fs, "write", write)
    return failed


def test_a_body_whose_write_fails_fails_alone_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk-full write of one body gives its slot a StoreError naming the cause; the others
    are stored, no temp file is left, and the total counts only the stored bodies."""
    texts = [f"body number {i} " * 50 for i in range(40)]
    texts[17] = "POISON " * 50
    failed = _fail_write_of(monkeypatch, b"POISON")
    with LocalStore(tmp_path / "s") as store:
        got = store.put_many(texts)
        assert failed
        bad = got[17]
        assert isinstance(bad, StoreError) and "disk full" in str(bad)
        assert [g for i, g in enumerate(got) if i != 17] == [
            ref_for(t) for i, t in enumerate(texts) if i != 17
        ]
        assert not store.has(ref_for(texts[17]))
        assert store.bodies_bytes == sum(len(t) for i, t in enumerate(texts) if i != 17)
    assert [p.name for p in (tmp_path / "s").rglob(".tmp-*")] == []


def test_a_failed_directory_fsync_fails_the_bodies_of_that_shard_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When one shard directory's fsync fails, its bodies are not reported durable (their
    slots hold the error), and the bodies of every other shard are (bodies written one file
    each, as when an envelope named their paths)."""
    texts = [f"shard spread {i}" for i in range(60)]
    victim = ref_for(texts[5])[:2]
    real = _fs.fsync
    with LocalStore(tmp_path / "s") as store:
        for text in texts:
            store.path_of(ref_for(text))
        victim_dir = tmp_path / "s" / "bodies" / victim

        def fsync(fd: int) -> None:
            st = os.fstat(fd)
            here = stat.S_ISDIR(st.st_mode) and victim_dir.exists()
            if here and os.path.samestat(st, os.stat(victim_dir)):
                raise OSError(5, "Input/output error")
            real(fd)

        monkeypatch.setattr(_fs, "fsync", fsync)
        got = store.put_many(texts)
    for text, result in zip(texts, got, strict=True):
        if ref_for(text)[:2] == victim:
            assert isinstance(result, StoreError) and "EIO" in str(result)
        else:
            assert result == ref_for(text)


def test_put_many_syncs_each_shard_directory_once_and_bodies_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group of new bodies written one file each (their paths given out) costs one fsync per
    body file, one per shard directory touched and one of ``bodies/``, not a directory fsync
    per body as a loop of put did."""
    texts = [f"grouped body {i}\n" * 20 for i in range(120)]
    with LocalStore(tmp_path / "s") as store:
        for text in texts:
            store.path_of(ref_for(text))
        kinds = count_fsyncs(monkeypatch)
        assert store.put_many(texts) == [ref_for(t) for t in texts]
        shards = {ref_for(t)[:2] for t in texts}
        assert kinds.count("file") == len(texts)
        assert kinds.count("dir") == len(shards) + 1
        kinds.clear()
        # Stored already: each shard's entries are synced again (a killed process may have
        # renamed a body into place without its directory fsync), still once per shard.
        assert store.put_many(texts[:50]) == [ref_for(t) for t in texts[:50]]
        assert kinds.count("file") == 0
        assert kinds.count("dir") == len({ref_for(t)[:2] for t in texts[:50]})


def test_memory_store_put_many_matches_local_store(tmp_path: Path) -> None:
    """Both stores give the same refs and the same errors' kinds for the same group."""
    texts = ["a" * 8, "b" * 8, "a" * 8, "c" * 8]
    with LocalStore(tmp_path / "s", quota_bytes=16) as local:
        memory = MemoryStore(quota_bytes=16)

        def shape(results: list[Any]) -> list[Any]:
            return [type(r).__name__ if isinstance(r, Exception) else r for r in results]

        assert shape(local.put_many(texts)) == shape(memory.put_many(texts))
