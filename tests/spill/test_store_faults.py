"""Fault injection: every filesystem call the store makes fails in turn, and nothing breaks.

Each kind of call in ``spill._fs.OPS`` is made to fail at each of its calls during a session's
life (open, put, append, metadata, reads, close). The failure must surface as a StoreError,
release the lock and every descriptor, and leave a session that reopens with each piece either
complete or absent: no partial body, no half record, no temp file.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from budget._errors import SessionLocked, StoreError
from spill import LocalStore, _fs, ref_for

TEXT = "a body worth keeping 中文 🎉 \ud800\n" * 500
RECORD = {"call_id": "toolu_1", "decision": "spilled", "ref": ref_for(TEXT)}
META = {"requests": 7, "window": 200_000}


def lifecycle(path: Path) -> None:
    """Open a session, store a body, log it, write metadata, read all back, close."""
    store = LocalStore(path)
    try:
        ref = store.put(TEXT)
        store.append_log([RECORD])
        store.write_meta(META)
        assert store.get(ref) == TEXT
        assert store.read_log() == [RECORD]
        assert store.read_meta() == META
        assert store.has(ref)
    finally:
        store.close()


def open_fds(under: Path) -> list[str]:
    """The files under ``under`` this process holds a descriptor on.

    Only the session's own files: a count of every descriptor of the process also sees the
    sockets and pipes that threads other tests left behind (s3fs's event loop, moto's server)
    open and close meanwhile, which made the check fail at random under xdist.
    """
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (or the listing's own descriptor)
            continue
        if target.startswith(str(under)):
            out.append(target)
    return sorted(out)


def failing(op: str, real: Callable[..., Any], nth: int, counter: Counter[str]) -> Any:
    """``real``, except that its nth call fails the way that kind of call fails for real."""

    def call(*args: Any, **kwargs: Any) -> Any:
        counter[op] += 1
        if counter[op] != nth:
            return real(*args, **kwargs)
        if op == "close":  # the kernel frees the descriptor even when close reports an error
            real(*args, **kwargs)
            raise OSError(errno.EIO, "injected close failure")
        if op == "write":  # a short write, then the disk is full
            fd, data = args
            real(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "injected: no space left on device")
        if op == "lock":
            raise OSError(errno.ENOLCK, "injected lock failure")
        raise OSError(errno.EIO, f"injected {op} failure")

    return call


def count_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many calls of each kind a clean lifecycle makes."""
    counter: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        for op in _fs.OPS:
            patch.setattr(_fs, op, failing(op, getattr(_fs, op), 0, counter))
        lifecycle(tmp_path / "clean")
    return counter


def test_a_clean_lifecycle_uses_every_kind_of_call_but_gc_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lifecycle below exercises every filesystem kind except unlink and rmdir, and dup (a
    store deferring its fsyncs: tests/spill/test_store_deferred.py)."""
    counts = count_calls(tmp_path, monkeypatch)
    assert set(_fs.OPS) - set(counts) == {"unlink", "rmdir", "dup"}


@pytest.mark.parametrize("op", [op for op in _fs.OPS if op not in ("unlink", "rmdir", "dup")])
def test_each_failing_call_leaves_a_consistent_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """Failing any one call of this kind raises StoreError and the session reopens intact."""
    total = count_calls(tmp_path, monkeypatch)[op]
    assert total > 0
    for nth in range(1, total + 1):
        path = tmp_path / f"{op}-{nth}"
        fds_before = open_fds(tmp_path)
        error: BaseException | None = None
        with monkeypatch.context() as patch:
            patch.setattr(_fs, op, failing(op, getattr(_fs, op), nth, Counter()))
            try:
                lifecycle(path)
            except BaseException as exc:
                error = exc
        where = f"{op} call #{nth}"
        assert error is None or isinstance(error, StoreError), f"{where}: {error!r}"
        assert not isinstance(error, SessionLocked), where
        assert open_fds(tmp_path) == fds_before, f"{where} leaked a descriptor"
        with LocalStore(path) as store:
            if store.has(RECORD["ref"]):
                assert store.get(RECORD["ref"]) == TEXT, where
            assert store.read_log() in ([], [RECORD]), where
            assert store.read_meta() in ({}, META), where
        assert [p.name for p in path.rglob(".tmp-*")] == [], where


def test_failed_put_leaves_no_visible_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put whose data write fails halfway raises StoreError and stores nothing under the ref."""
    with LocalStore(tmp_path / "s") as store:
        with monkeypatch.context() as patch:
            patch.setattr(_fs, "write", failing("write", _fs.write, 1, Counter()))
            with pytest.raises(StoreError, match="disk full"):
                store.put(TEXT)
        assert not store.has(RECORD["ref"])
        assert store.bodies_bytes == 0
        assert [p.name for p in (tmp_path / "s").rglob(".tmp-*")] == []
        assert store.put(TEXT) == RECORD["ref"]
        assert store.get(RECORD["ref"]) == TEXT


def test_torn_append_is_followed_by_valid_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that writes half its bytes then fails does not corrupt later appends."""
    with LocalStore(tmp_path / "s") as store:
        store.append_log([{"n": 1}])
        with monkeypatch.context() as patch:
            patch.setattr(_fs, "write", failing("write", _fs.write, 1, Counter()))
            with pytest.raises(StoreError):
                store.append_log([{"n": 2}, {"n": 3}])
        store.append_log([{"n": 2}, {"n": 3}])
        assert store.read_log() == [{"n": 1}, {"n": 2}, {"n": 3}]
