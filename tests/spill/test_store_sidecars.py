"""Sidecars written in place (``LocalStore.overwrite_sidecar``, the proxy's usage): one write over
the old bytes, no rename, no fsync, and not under the store's mutex."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from spill import LocalStore, _fs
from spill._errors import StoreError

NAME = "proxy_usage.json"


def test_an_overwrite_writes_over_the_first_bytes_in_place_without_rename_or_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidecar is created with mode 0600, then written over in place (the same inode, its
    tail kept past shorter bytes), with no rename and no fsync; ``read_sidecar`` reads it."""
    calls: list[str] = []
    real_rename, real_fsync = _fs.rename, _fs.fsync

    def rename(src: str, dst: str, *, dir_fd: int) -> None:
        calls.append("rename")
        real_rename(src, dst, dir_fd=dir_fd)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(_fs, "rename", rename)
    monkeypatch.setattr(_fs, "fsync", fsync)
    with LocalStore(tmp_path / "s") as store:
        calls.clear()
        store.overwrite_sidecar(NAME, b"first, longer")
        path = tmp_path / "s" / NAME
        inode = path.stat().st_ino
        assert path.stat().st_mode & 0o777 == 0o600
        store.overwrite_sidecar(NAME, b"second")
        assert store.read_sidecar(NAME) == b"second longer"
        assert path.stat().st_ino == inode
        assert calls == []


def test_an_overwrite_is_not_held_up_by_the_stores_mutex(tmp_path: Path) -> None:
    """With another thread holding the store's mutex (a deferred sync's fsyncs hold it), an
    overwrite goes through at once."""
    with LocalStore(tmp_path / "s", defer_sync=True) as store:
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store._mutex:
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert held.wait(10)
            store.overwrite_sidecar(NAME, b"{}")
            assert (tmp_path / "s" / NAME).read_bytes() == b"{}"
        finally:
            release.set()
            holder.join(10)


def test_an_overwrite_refuses_other_names_non_bytes_a_closed_store_and_a_planted_fifo(
    tmp_path: Path,
) -> None:
    """Only a sidecar name and bytes are written; a closed store refuses; a FIFO planted under
    the name fails the write at once instead of blocking it."""
    store = LocalStore(tmp_path / "s")
    try:
        with pytest.raises(StoreError, match="not a sidecar name"):
            store.overwrite_sidecar("session.json", b"{}")
        with pytest.raises(StoreError, match="bytes"):
            store.overwrite_sidecar(NAME, "{}")  # type: ignore[arg-type]
        os.mkfifo(tmp_path / "s" / NAME)
        with pytest.raises(StoreError):
            store.overwrite_sidecar(NAME, b"{}")
        (tmp_path / "s" / NAME).unlink()
    finally:
        store.close()
    with pytest.raises(StoreError, match="closed"):
        store.overwrite_sidecar(NAME, b"{}")
    assert not (tmp_path / "s" / NAME).exists()
