"""A staleness batch commits its bodies as one group: few directory fsyncs, failures alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from benchmarks.perf import _conversation, _result_text, _round
from budget import Budget
from spill import _fs, ref_for

ROUNDS = 60


def _adopted(path: Path) -> tuple[Budget, list[dict[str, object]]]:
    """A session that adopted ``ROUNDS`` rounds of 8 KB results, and the next request's history."""
    session = Budget.open(path)
    history = _conversation(ROUNDS, 8_000)
    session.prepare(history, now=0.0)
    return session, history + list(_round(ROUNDS, _result_text(ROUNDS, 8_000)))


def test_a_staleness_batch_syncs_each_shard_directory_once_not_each_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch that trims an adopted history stores its bodies with one fsync per body file
    and one per shard directory touched (it used to fsync a directory after every body)."""
    session, history = _adopted(tmp_path / "s")
    kinds: list[str] = []
    real = _fs.fsync

    def fsync(fd: int) -> None:
        kinds.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(_fs, "fsync", fsync)
    with session:
        req = session.prepare(history, now=100_000.0)
    trimmed = [d for d in req.report.decisions if d.kind == "trimmed"]
    assert req.report.staleness_ran and len(trimmed) >= ROUNDS - 5
    shards = {d.ref[:2] for d in trimmed if d.ref is not None}
    assert len(shards) < len(trimmed)  # some shard holds two bodies: "once" is observable
    assert kinds.count("file") == len(trimmed) + 1  # the bodies, then the log
    assert kinds.count("dir") <= len(shards) + 1  # each shard, then bodies/
    with Budget.open(tmp_path / "s") as again:
        for d in trimmed:
            assert d.ref is not None
            assert again.read(d.ref) == _result_text(int(d.call_id.split("_")[1]), 8_000)


def test_a_body_that_fails_in_a_batch_stays_inline_and_the_others_are_trimmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One body of the batch cannot be written (disk full): its result is kept whole as
    ``kept_unspillable`` with a ``spill_failed`` event, and every other result is trimmed
    with its body durable, in the same request."""
    session, history = _adopted(tmp_path / "s")
    victim = _result_text(7, 8_000)
    real = _fs.write

    def write(fd: int, data: bytes | memoryview) -> None:
        if bytes(data) == victim.encode():
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(_fs, "write", write)
    with session, capture_logs() as events:
        req = session.prepare(history, now=100_000.0)
    by_id = {d.call_id: d for d in req.report.decisions}
    failed = by_id["toolu_00000007"]
    assert (failed.kind, failed.reason) == ("kept_unspillable", "spill_failed")
    shown = [
        block["content"]
        for msg in req.messages
        if isinstance(msg["content"], list)
        for block in msg["content"]
        if block.get("tool_use_id") == "toolu_00000007"
    ]
    assert shown == [victim]
    errors = [e for e in events if e["event"] == "toolbudget.spill.failed"]
    assert [e["call_id"] for e in errors] == ["toolu_00000007"]
    assert "disk full" in errors[0]["error"]
    others = [d for cid, d in by_id.items() if d.kind == "trimmed"]
    assert len(others) >= ROUNDS - 6
    with Budget.open(tmp_path / "s") as again:
        for d in others:
            assert d.ref is not None and again.read(d.ref) is not None
            assert ref_for(again.read(d.ref)) == d.ref
