"""A store deferring its fsyncs (``LocalStore(defer_sync=True)``, the proxy's): bodies and log
lines are written at once, and made durable at ``sync`` or ``close``, the bodies before the log."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from spill import LocalStore, _deferred, _fs
from spill._errors import StoreError

RECORD = {"call_id": "toolu_1", "decision": "spilled"}


def _fsyncs(monkeypatch: pytest.MonkeyPatch, fail: list[str] | None = None) -> list[str]:
    """The names of what is fsync'd from now on; a name in ``fail`` fails its next fsync once."""
    synced: list[str] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if fail and name in fail:
            fail.remove(name)
            raise OSError(errno.EIO, "injected fsync failure")
        synced.append(name)
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    return synced


def test_a_deferred_put_is_written_at_once_and_fsynced_before_the_log_at_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put returns with its body in place and readable, nothing fsync'd; ``sync`` fsyncs the
    body's file, its shard directory and ``bodies/`` (put's own order), then the log."""
    with LocalStore(tmp_path / "s", defer_sync=True) as store:
        synced = _fsyncs(monkeypatch)
        ref = store.put("x" * 5_000)
        store.append_log([RECORD])
        assert synced == []
        assert store.get(ref) == "x" * 5_000
        assert (tmp_path / "s" / "bodies" / ref[:2] / f"{ref}.txt").exists()
        store.sync()
        assert synced == [f"{ref}.txt", ref[:2], "bodies", "decisions.jsonl"]
        store.sync()
        assert len(synced) == 4, "nothing left to sync"


def test_a_deferred_group_commit_and_pack_are_fsynced_at_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``put_many``'s bodies (packed when there are enough of them) are fsync'd at ``sync``, every
    one of them before the log."""
    with LocalStore(tmp_path / "s", defer_sync=True) as store:
        synced = _fsyncs(monkeypatch)
        refs = store.put_many([f"body {i} " * 200 for i in range(40)])
        store.append_log([RECORD])
        assert synced == []
        store.sync()
        assert synced[-1] == "decisions.jsonl"
        assert any(name.startswith("pack-") for name in synced) or all(
            f"{ref}.txt" in synced for ref in refs if isinstance(ref, str)
        )
        assert "bodies" in synced
    with LocalStore(tmp_path / "s") as again:
        assert [again.get(r) for r in refs if isinstance(r, str)] == [
            f"body {i} " * 200 for i in range(40)
        ]


def test_close_syncs_what_was_deferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing a deferring store fsyncs its bodies and then its log."""
    store = LocalStore(tmp_path / "s", defer_sync=True)
    synced = _fsyncs(monkeypatch)
    ref = store.put("y" * 3_000)
    store.append_log([RECORD])
    store.close()
    assert synced == [f"{ref}.txt", ref[:2], "bodies", "decisions.jsonl"]


def test_a_failed_deferred_fsync_raises_at_sync_and_the_next_sync_retries_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync that fails at ``sync`` is a StoreError and the log is not fsync'd after it; the
    next ``sync`` makes that fsync and those after it."""
    with LocalStore(tmp_path / "s", defer_sync=True) as store:
        ref = store.put("z" * 3_000)
        store.append_log([RECORD])
        synced = _fsyncs(monkeypatch, fail=[ref[:2]])
        with pytest.raises(StoreError, match="fsync deferred writes"):
            store.sync()
        assert synced == [f"{ref}.txt"]
        store.sync()
        assert synced == [f"{ref}.txt", ref[:2], "bodies", "decisions.jsonl"]


def test_past_its_bound_a_deferring_store_fsyncs_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never more than ``MAX_PENDING`` descriptors are kept: beyond them the fsync is made in
    the put, as without deferring."""
    monkeypatch.setattr(_deferred, "MAX_PENDING", 1)
    with LocalStore(tmp_path / "s", defer_sync=True) as store:
        synced = _fsyncs(monkeypatch)
        ref = store.put("w" * 3_000)
        assert synced == [ref[:2], "bodies"], "the file's fsync kept, the others made at once"
        store.sync()
        assert synced == [ref[:2], "bodies", f"{ref}.txt"]


def test_without_defer_sync_a_put_is_durable_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library's default: a put fsyncs its body, its shard and ``bodies/`` before it
    returns, and ``sync`` has nothing to do."""
    with LocalStore(tmp_path / "s") as store:
        synced = _fsyncs(monkeypatch)
        ref = store.put("v" * 3_000)
        assert synced[0].startswith(f".tmp-{ref}.txt")  # before its rename into place
        assert synced[1:] == [ref[:2], "bodies"]
        store.sync()
        assert len(synced) == 3


class _Unpacked(LocalStore):
    """A LocalStore writing every body as a file of its own (the proxy's, whose envelopes name
    them), so that a group commit spans several shards."""

    _pack_min = 1_000_000


@pytest.mark.parametrize(
    ("defer", "fsync", "threads"),
    [(True, True, False), (False, False, False), (False, True, True)],
    ids=["deferred", "no-fsync", "fsync"],
)
def test_a_group_commits_shards_are_written_in_threads_only_when_they_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, defer: bool, fsync: bool, threads: bool
) -> None:
    """A put_many over several shards writes them in threads when each makes its own fsyncs
    (they overlap), one after the other when those are put off or off (a create and a rename
    each: threads would cost more); every body is stored either way."""
    from concurrent.futures import ThreadPoolExecutor

    from spill import _group

    pools: list[int] = []

    def counting(max_workers: int, thread_name_prefix: str) -> ThreadPoolExecutor:
        pools.append(max_workers)
        return ThreadPoolExecutor(max_workers, thread_name_prefix)

    monkeypatch.setattr(_group, "ThreadPoolExecutor", counting)
    texts = [f"body {i} " * 200 for i in range(20)]
    with _Unpacked(tmp_path / "s", defer_sync=defer, fsync=fsync) as store:
        refs = store.put_many(texts)
        assert len({ref[:2] for ref in refs if isinstance(ref, str)}) > 1, "one shard"
        assert [store.get(ref) for ref in refs if isinstance(ref, str)] == texts
    assert bool(pools) == threads
