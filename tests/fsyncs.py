"""Counting a store's fsyncs: what a durability test observes of a commit."""

from __future__ import annotations

import os
import stat

import pytest

from spill import _fs


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each fsync through ``spill._fs`` from here on as "file" or "dir", in order."""
    kinds: list[str] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        kinds.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    return kinds
